// RedisCluster: a RedisLink (redis/link.hpp) over a Redis Cluster.
//
// Routing: each command goes to the master serving the hash slot of its
// first key (redis/slots.hpp), by a slot map read with CLUSTER SLOTS
// from any reachable node (seeds first at start). A pipeline is split per
// node — one round trip per node, the nodes asked one after another — and
// the replies are put back in the caller's order. A MULTI ... EXEC block
// travels as one unit, routed by its first key. Keyless commands (PING,
// PUBLISH) go to any master, a different one on each retry. A WAIT travels
// with the command (or MULTI ... EXEC block) before it: same node, same
// connection, retried with it, so it counts the replicas that have that write.
// Redirects: MOVED (the slot has a new owner) refreshes the slot map and
// retries there; ASK (the slot is migrating and the key is on the target)
// retries on the target, prefixed with ASKING, without touching the map;
// TRYAGAIN and CLUSTERDOWN (a multi-key command mid-migration, a failover)
// retry after a short backoff — a TRYAGAIN from the node an ASK sent the
// command to retries there (with ASKING) again. A connection that fails (a
// dead master) refreshes the map and retries. All of this is bounded: no new
// round once connect_timeout + op_timeout have passed since the call began,
// and at most max_attempts rounds that met a dead node or a MOVED; rounds
// retried only for a passing state (ASK, TRYAGAIN: an entry whose keys a
// reshard has split between two nodes until its last key moves;
// CLUSTERDOWN: a failover, or a node that has not yet seen a restarted peer
// come back) are bounded by the deadline alone (and 64 rounds). Then the last
// error — Errc::unavailable, as with a single Redis that is down. A timeout
// is returned at once (the caller's budget is one op_timeout, as RedisPool's).
// A command whose connection broke mid-pipeline may have run before the
// retry runs it again: every command the backend and the lease table send is
// safe to repeat (scripts check before they write), as with RedisPool's own
// one retry.
// Connections: one RedisPool per node, made on first use, each with the
// node options' pool_size, timeouts and credentials (no SELECT: a Cluster has
// only database 0).
// Thread safety: every method may be called concurrently; refreshes are
// serialised and a caller whose map is already stale skips its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "redis/link.hpp"
#include "redis/options.hpp"
#include "redis/slot_map.hpp"

namespace kcache::redis {

using RedirectCounts = ClusterCounts;  // redis/options.hpp

class RedisCluster final : public RedisLink {
 public:
  explicit RedisCluster(ClusterOptions opts);

  // Reads the first slot map; Errc::unavailable when no seed answers.
  Status start();

  Result<Reply> command(const Args& args) override;
  Result<std::vector<Reply>> pipeline(const std::vector<Args>& cmds) override;
  Result<std::vector<std::string>> scan(std::string_view pattern) override;
  std::vector<Endpoint> endpoints() override;

  RedirectCounts counts() const;
  std::shared_ptr<const SlotMap> slot_map() const;

 private:
  struct Segment;  // a command, or a MULTI ... EXEC block, and where it goes
  std::shared_ptr<RedisPool> pool_for(const Endpoint& node);
  // Re-reads the map unless it changed since `seen_epoch`; asks `hint` first.
  Status refresh(std::uint64_t seen_epoch, const std::optional<Endpoint>& hint);
  std::pair<std::shared_ptr<const SlotMap>, std::uint64_t> snapshot() const;

  const ClusterOptions opts_;
  mutable std::mutex mu_;
  std::shared_ptr<const SlotMap> map_;                       // GUARDED_BY(mu_)
  std::uint64_t epoch_ = 0;                                  // GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<RedisPool>> pools_;  // GUARDED_BY(mu_): by host:port
  std::mutex refresh_mu_;                                    // one refresh at a time
  std::atomic<std::uint64_t> moved_{0}, ask_{0}, refreshes_{0}, tryagain_{0}, clusterdown_{0}, node_errors_{0},
      failed_{0};
};

}  // namespace kcache::redis
