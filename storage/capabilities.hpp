// Optional capabilities: what some backends do beyond the contract every
// backend keeps (storage/backend.hpp), each a small interface of its own.
// A caller asks with capability<C>(backend) and gets nullptr where the
// backend lacks it; no backend answers "not supported" at run time.
//   KeepsBreakdown     memory, disk: per-target and per-mode totals kept as
//                      entries are stored, removed, evicted and read
//                      (O(targets + modes)); elsewhere /v1/stats scans list().
//   HasClusterRouter   redis-cluster: the router's counters (redis/cluster.hpp).
// Thread safety: as Backend's; every method may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "redis/options.hpp"
#include "storage/backend.hpp"

namespace kcache::storage {

// Totals of one target or mode (/v1/stats' breakdown).
struct Tally {
  std::uint64_t entries = 0, bytes = 0, hits = 0;
};

struct Breakdown {
  std::map<std::string, Tally> by_target, by_mode;
};

class KeepsBreakdown {
 public:
  virtual ~KeepsBreakdown() = default;
  virtual Breakdown breakdown() = 0;
};

class HasClusterRouter {
 public:
  virtual ~HasClusterRouter() = default;
  virtual redis::ClusterCounts cluster_counts() const = 0;
};

// The capability C of `backend`, or nullptr.
template <typename C>
C* capability(Backend& backend) {
  return dynamic_cast<C*>(&backend);
}

}  // namespace kcache::storage
