// What a connection to Redis needs: where, who, how long to wait, how many
// connections at most; and for a Redis Cluster, the seeds to read the slot
// map from. Plain values, parsed from URLs by redis/url.hpp; the users of
// the library (storage/redis/, server/leases/) add their own settings
// beside them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kcache::redis {

struct ConnectOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user;      // Redis 6 ACL user; empty: AUTH <password> only
  std::string password;  // never logged
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds op_timeout{2000};
  std::size_t pool_size = 8;  // connections at most; more callers wait up to op_timeout
};

// A Redis Cluster: `node` holds what every node connection uses
// (credentials, timeouts, pool size per node); its host, port and db are
// ignored (a Cluster has db 0 only).
struct ClusterOptions {
  ConnectOptions node;
  std::vector<std::pair<std::string, int>> seeds;  // host, port: any nodes of the cluster
  int max_attempts = 5;  // rounds per call that met a dead node or a MOVED, before failing open
};

// What a Cluster router (redis/cluster.hpp) did since it started: redirects
// followed, rounds retried and why, slot maps read, calls that failed open
// after their retries. Monotonic counters.
struct ClusterCounts {
  std::uint64_t moved = 0;
  std::uint64_t ask = 0;
  std::uint64_t refreshes = 0;    // slot maps installed, the first included
  std::uint64_t tryagain = 0;     // TRYAGAIN replies (a multi-key command mid-migration)
  std::uint64_t clusterdown = 0;  // CLUSTERDOWN replies (no master for a slot, mid-failover)
  std::uint64_t node_errors = 0;  // a node could not be reached or dropped the connection
  std::uint64_t failed = 0;       // calls that gave up (unavailable or timeout)
};

}  // namespace kcache::redis
