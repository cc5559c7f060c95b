// Replicas on one Redis: when --storage is redis://…, several kcache-server
// processes share leases and wake each other's waiters through that Redis
// (docs/operations.md "## Scaling out").
//
// Leases (all keys under one hash tag, so a Cluster keeps them in one slot):
//   kcache:{leases}:lease:<hex>   string: the lease token, PX ttl — SET NX PX
//   kcache:{leases}:info:<hex>    hash: holder, acquired (unix ms), renewals; PX ttl
//   kcache:{leases}:live          zset: <hex> → expiry (Redis TIME, ms), for
//                                 list(), the active count, counting expiries
//                                 and the cap (--max-leases: acquire drops the
//                                 expired members, then refuses at the cap)
//   kcache:{leases}:counters      hash: granted renewed released expired —
//                                 summed over every replica
// acquire is one Lua script around `SET lease token NX PX ttl`; renew and
// release are Lua compare-and-set / compare-and-delete on the token (compared
// as SHA-1 digests inside Redis, so comparison time says nothing about the
// token's prefix). Expiry is Redis's own PX: a holder that dies simply stops
// renewing, on whichever replica it talked to.
// Landings: PUBLISH kcache:landed <hex>; a subscriber thread per server
// (dedicated connection, TCP keepalive, reconnect with backoff) notifies
// local waiters (server/leases/landings.hpp).
// Thread safety: everything may be used from any thread; every call but
// ttl_ms() does network I/O — call on the blocking pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.hpp"
#include "server/leases/landings.hpp"
#include "server/leases/lease_table.hpp"
#include "server/leases/waiters.hpp"

namespace kcache::server {

struct RedisReplicaParts {
  std::unique_ptr<LeaseTable> leases;
  std::unique_ptr<Landings> landings;  // owns the subscriber thread; stops it when destroyed
};

// `storage_uri` is the redis:// URI given to --storage (same server,
// credentials and database). unavailable when Redis cannot be reached.
// `max_leases` caps the shared live set: an acquire that finds it full
// (expired members dropped first) is refused, LeaseGrant::table_full.
Result<RedisReplicaParts> make_redis_replica_parts(const std::string& storage_uri, std::uint64_t ttl_ms,
                                                   std::uint64_t max_leases,
                                                   Waiters& waiters);

}  // namespace kcache::server
