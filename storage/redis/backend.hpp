// RedisBackend: artifacts in a shared Redis — a single instance (or a primary
// with replicas), or a Redis Cluster (docs/storage-cluster.md), through the
// same code: the backend talks to a RedisLink (redis/link.hpp) that
// is either one pool or the Cluster router (redis/cluster.hpp).
//
// Key scheme (one hash tag per entry, so a Cluster keeps an entry in one
// slot; the four index keys share the tag {index}, so one slot too). Every
// name starts with key_prefix, <P> below ("kcache:" by default, which gives
// the names of a store from before prefixes; "kcache:ns:<ns>:" for a
// namespace, open_namespace_backend); the prefix holds no brace, so the tag
// is always the first pair of braces (storage/redis/key_scheme.hpp):
//   <P>{<hex>}:meta                     hash: size sha256 chunks created_ms
//                                        last_access_ms hits label target mode
//                                        dtype toolchain compile_ms [pinned]
//                                        (pinned "1"/"0", written by
//                                        set_pinned only: absent is unpinned)
//   <P>{<hex>}:chunk:<N>                the object, in chunk_bytes pieces
//   <P>{<hex>}:tmp:<token>:<N>          a put's chunks before publish (PX temp_ttl)
//   <P>{<hex>}:sync                     a 10 s marker a durable put of an entry
//                                        already present writes before WAIT
//   <P>{index}:lru                      zset member=<hex> score=last access ms
//   <P>{index}:sizes                    hash <hex> -> size
//   <P>{index}:usage                    hash entries, bytes
//   <P>{index}:keys                     zset member=<hex> score=0: key order,
//                                        paged by list() (ZRANGE BYLEX;
//                                        filled from lru at open if short)
// Two backends with different prefixes on one Redis (or Cluster) share no
// key: put, get, list, usage, evict and verify (its SCAN is <P>{*}:meta) of
// one never see the other's entries.
// put(): SET the temp chunks with a TTL, [fault hook], then one Lua script
// on the entry's keys commits only if the meta key is absent (RENAME +
// PERSIST each chunk, HSET meta); a second script adds it to the index. A
// crash before the commit leaves temp keys that expire; a crash between the
// two scripts leaves an unindexed entry that verify() re-indexes. With
// wait_replicas, WAIT follows the publish on its connection; too few acks:
// Errc::not_durable (the entry stays, indexed, on the master).
// get(): MULTI/EXEC reads meta and chunk 0 (a second one the other chunks,
// re-checking meta); a small script bumps hits and last access. The bytes
// are checked against the SHA-256 in meta on every get (a torn read of a
// replaced entry is retried, not called corrupt); a mismatch or a missing
// chunk deletes the entry (Errc::corrupt).
// Connections: a pool of hiredis synchronous contexts; each call runs on the
// caller's thread. Connect and operation timeouts are separate. A broken
// connection is dropped; a call that failed on a reused connection is retried
// once on a fresh one, so a Redis restart costs at most one failed call per
// idle connection and needs no reopen. Redis down: Errc::unavailable (refused,
// reset) or Errc::timeout (no answer within op_timeout).
// open ignores SIGPIPE process-wide: hiredis 0.14 writes with write(), and a
// write to a reset socket would otherwise kill the process.
// Capacity eviction (a put beyond capacity_bytes) deletes the least recently
// used unpinned entries; a pin is checked in the delete script itself.
// Thread safety: every method may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "redis/options.hpp"
#include "storage/backend.hpp"
#include "storage/fault_hook.hpp"

namespace kcache::storage {

// The connection (redis/options.hpp) and what the backend adds to it.
struct RedisOptions : redis::ConnectOptions {
  // How long a put's temp chunks outlive a crashed writer. Long enough for
  // the slowest upload of one object, short enough not to hoard memory.
  std::chrono::milliseconds temp_ttl{300'000};
  // Under Redis's 512 MB limit and small enough not to stall it; 64 bytes
  // under 1 MiB so that a chunk and its string header fill jemalloc's 1 MiB
  // size class (exactly 1 MiB took the 1.25 MiB class: 26 % more memory).
  std::size_t chunk_bytes = (1 << 20) - 64;
  std::uint64_t capacity_bytes = 0;   // 0: unlimited
  // Where every key of the store starts (see "Key scheme" above): non-empty,
  // ending with ':', no '{', '}', '*', '?', '[' or whitespace; otherwise
  // opening is Errc::invalid_argument.
  std::string key_prefix = "kcache:";
  // Durability (docs/storage-cluster.md "Durability"): with wait_replicas > 0
  // a put, once published, sends WAIT wait_replicas wait_timeout on the
  // connection that published (the entry's master in a Cluster) and fails
  // with Errc::not_durable when fewer replicas acknowledged in time. 0: off
  // (replication stays asynchronous). wait_timeout must be below op_timeout.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{500};
  std::shared_ptr<PutFaultHook> fault_hook;  // tests only
};

// Parses a redis:// URL (redis/url.hpp) with the backend's own query
// parameters: wait_replicas=N (0..16; 0 is off) and wait_timeout_ms=N
// (default 500, below timeout_ms). Errc::invalid_argument for a malformed
// URL or an unknown parameter.
Result<RedisOptions> parse_redis_url(const std::string& url);

// Connects once to check the server and credentials: Errc::unavailable if
// Redis cannot be reached (the backend is not created then);
// Errc::invalid_argument for a bad key_prefix (or other option).
Result<std::unique_ptr<Backend>> open_redis_backend(const RedisOptions& options);

// A Redis Cluster: `node` holds what every node connection uses (credentials,
// timeouts, pool size per node, and the backend's chunking, TTL, capacity
// and key prefix); its host, port and db are ignored (a Cluster has db 0 only).
struct RedisClusterOptions {
  RedisOptions node;
  std::vector<std::pair<std::string, int>> seeds;  // host, port: any nodes of the cluster
  int max_attempts = 5;  // rounds per call that met a dead node or a MOVED, before failing open
  // What the Cluster router (redis/cluster.hpp) needs of these.
  redis::ClusterOptions router() const { return {node, seeds, max_attempts}; }
};

// Parses a redis-cluster:// URL (redis/url.hpp) with the same query
// parameters as parse_redis_url. Errc::invalid_argument for a malformed URL
// (a database other than 0 included).
Result<RedisClusterOptions> parse_redis_cluster_url(const std::string& url);

// Reads the slot map from the seeds: Errc::unavailable if none answers.
// The backend's name() is "redis-cluster".
Result<std::unique_ptr<Backend>> open_redis_cluster_backend(const RedisClusterOptions& options);

}  // namespace kcache::storage
