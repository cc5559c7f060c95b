// Metrics: the server's counters, and their two renderings — Prometheus
// text exposition (GET /metrics, format 0.0.4) and the JSON of GET /v1/stats.
//
// Counters only ever increase; gauges (entries, bytes, active leases and
// connections) are sampled by the caller at render time and passed in.
// Thread safety: every method may be called concurrently; scalar counters
// are relaxed atomics, labelled families sit behind one mutex.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "redis/options.hpp"
#include "server/leases/lease_table.hpp"
#include "storage/backend.hpp"

namespace kcache::server {

// Values sampled when /metrics or /v1/stats is rendered.
struct Gauges {
  std::optional<std::uint64_t> entries;         // nullopt: storage did not answer
  std::optional<std::uint64_t> bytes;
  std::optional<std::uint64_t> capacity_bytes;
  LeaseCounters leases;
  std::uint64_t connections_active = 0;
  std::uint64_t waiters = 0;
  std::optional<redis::ClusterCounts> cluster;  // set when storage is a Redis Cluster
  // Per namespace (server/namespaces.hpp), in the configured set only.
  struct Namespace {
    std::string name;
    std::optional<std::uint64_t> entries;  // nullopt: its store did not answer
    std::optional<std::uint64_t> bytes;
    std::uint64_t quota_bytes = 0;    // 0: none
    std::uint64_t quota_entries = 0;  // 0: none
  };
  std::vector<Namespace> namespaces;
};

// Counters of one namespace (labels: configured namespace names only).
struct NamespaceCounters {
  std::uint64_t hits = 0;        // artifact GETs answered 200 in the namespace (read-through hits included)
  std::uint64_t misses = 0;
  std::uint64_t stored = 0;      // uploads stored
  std::uint64_t rejected = 0;    // uploads refused (bad bundle, signature, quota)
  std::uint64_t quota_refused = 0;          // of `rejected`: did not fit the quota
  std::uint64_t quota_evicted_entries = 0;  // entries evicted to make room for an upload
  std::uint64_t quota_evicted_bytes = 0;
  std::map<std::string, std::uint64_t> read_through_hits;  // from namespace -> hits
};

enum class NsEvent { hit, miss, stored, rejected, quota_refused };

class Metrics {
 public:
  Metrics();

  // One answered request. `route` is the route template ("/v1/artifacts/{key}").
  void record_request(std::string_view route, std::string_view method, int status, double seconds,
                      std::uint64_t bytes_in, std::uint64_t bytes_out);
  // One failed storage call; `op` names the Backend method ("get", "put", …).
  void storage_error(std::string_view op);
  // A stored upload's metadata, for the per-target and per-mode breakdown.
  void stored(const std::string& target, const std::string& mode, std::uint64_t bytes);
  // One RESP command on a key: command ("get", "set", …), the key's cache
  // type (server/resp/resp_keyspace.hpp) and its result ("hit", "miss",
  // "stored", "waited_hit", "waited_miss", "compiler", …).
  void resp_command(std::string_view command, std::string_view type, std::string_view result);
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> resp_commands() const;
  // Namespace counters (server/metrics_namespaces.cpp).
  void ns_event(const std::string& ns, NsEvent e);
  void ns_read_through_hit(const std::string& ns, const std::string& from);
  void ns_quota_evicted(const std::string& ns, std::uint64_t entries, std::uint64_t bytes);
  std::map<std::string, NamespaceCounters> namespace_counters() const;

  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> hot_hits_http{0};  // of `hits`, answered from the hot tier
  std::atomic<std::uint64_t> hot_hits_resp{0};  // RESP GET hits answered from the hot tier
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> puts_stored{0};
  std::atomic<std::uint64_t> puts_present{0};
  std::atomic<std::uint64_t> puts_rejected{0};
  std::atomic<std::uint64_t> evicted_entries{0};
  std::atomic<std::uint64_t> evicted_bytes{0};
  std::atomic<std::uint64_t> leases_waited{0};     // GETs that waited on a lease
  std::atomic<std::uint64_t> waits_fulfilled{0};   // … and got the artifact
  std::atomic<std::uint64_t> connections_accepted{0};
  std::atomic<std::uint64_t> connections_rejected{0};
  std::atomic<std::uint64_t> resp_auth_timeouts{0};  // RESP connections closed unauthenticated
  std::atomic<std::uint64_t> verify_corrupt{0};
  // Reported by ranks (POST /v1/cold-start, docs/cold-start.md).
  std::atomic<std::uint64_t> eager_block_calls{0};
  std::atomic<std::uint64_t> regions_switched{0};
  std::atomic<std::uint64_t> background_compile_ms{0};
  std::atomic<std::uint64_t> background_refusals{0};
  std::atomic<std::uint64_t> background_faults{0};

  std::string render_prometheus(const Gauges& g) const;

  struct Breakdown {
    std::uint64_t stored = 0;  // uploads stored by this process
    std::uint64_t stored_bytes = 0;
  };
  // Totals kept here (not sampled): requests, bytes in/out, storage errors.
  std::uint64_t requests_total() const;
  std::uint64_t bytes_in() const { return bytes_in_.load(std::memory_order_relaxed); }
  std::uint64_t bytes_out() const { return bytes_out_.load(std::memory_order_relaxed); }
  std::uint64_t storage_errors_total() const;
  std::map<std::string, Breakdown> stored_by_target() const;
  std::map<std::string, Breakdown> stored_by_mode() const;
  double uptime_seconds() const;

 private:
  static constexpr std::size_t k_buckets = 16;
  struct Histogram {
    std::array<std::uint64_t, k_buckets> counts{};  // non-cumulative
    std::uint64_t count = 0;
    double sum = 0;
  };

  const std::chrono::steady_clock::time_point started_;
  std::atomic<std::uint64_t> bytes_in_{0};
  std::atomic<std::uint64_t> bytes_out_{0};
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests_;  // GUARDED_BY(mu_)
  std::map<std::string, Histogram> latency_;                                     // GUARDED_BY(mu_)
  std::map<std::string, std::uint64_t> storage_errors_;                          // GUARDED_BY(mu_)
  std::map<std::string, Breakdown> by_target_;                                   // GUARDED_BY(mu_)
  std::map<std::string, Breakdown> by_mode_;                                     // GUARDED_BY(mu_)
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> resp_;  // GUARDED_BY(mu_)
  std::map<std::string, NamespaceCounters> ns_;                                      // GUARDED_BY(mu_)
  void render_namespaces(std::string& out, const Gauges& g) const;
};

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string prometheus_escape(std::string_view v);

}  // namespace kcache::server
