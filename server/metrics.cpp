#include "server/metrics.hpp"

#include "storage/entry_query.hpp"

#include <array>
#include <charconv>

namespace kcache::server {

namespace {

// Upper bounds of the latency buckets, in seconds; +Inf is implicit.
constexpr std::array<double, 16> k_bounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,   0.5,   1,      2.5,   5,     10,   30,    60};

// Shortest text that reads back as the same double ("0.005", not
// "0.0050000000000000001").
std::string num(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const char* name, std::uint64_t v) {
  out += name;
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

void scalar(std::string& out, const char* name, const char* type, const char* help, std::uint64_t v) {
  family(out, name, type, help);
  sample(out, name, v);
}

}  // namespace

std::string prometheus_escape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Metrics::Metrics() : started_(std::chrono::steady_clock::now()) {}

void Metrics::record_request(std::string_view route, std::string_view method, int status, double seconds,
                             std::uint64_t bytes_in, std::uint64_t bytes_out) {
  bytes_in_.fetch_add(bytes_in, std::memory_order_relaxed);
  bytes_out_.fetch_add(bytes_out, std::memory_order_relaxed);
  std::size_t b = 0;
  while (b < k_bounds.size() && seconds > k_bounds[b]) ++b;
  // A fixed set of methods: an unmatched request's method comes from the
  // client, and every label value is a series /metrics keeps forever.
  static constexpr std::string_view k_methods[] = {"GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "-"};
  std::string_view m = "other";
  for (auto known : k_methods) {
    if (method == known) m = known;
  }
  std::lock_guard lock(mu_);
  ++requests_[{std::string(route), std::string(m), status}];
  auto& h = latency_[std::string(route)];
  if (b < k_buckets) ++h.counts[b];
  ++h.count;
  h.sum += seconds;
}

void Metrics::storage_error(std::string_view op) {
  std::lock_guard lock(mu_);
  ++storage_errors_[std::string(op)];
}

void Metrics::stored(const std::string& target, const std::string& mode, std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto& t = by_target_[target];
  ++t.stored;
  t.stored_bytes += bytes;
  auto& m = by_mode_[mode];
  ++m.stored;
  m.stored_bytes += bytes;
}

std::uint64_t Metrics::requests_total() const {
  std::lock_guard lock(mu_);
  std::uint64_t n = 0;
  for (const auto& [k, v] : requests_) n += v;
  return n;
}

std::uint64_t Metrics::storage_errors_total() const {
  std::lock_guard lock(mu_);
  std::uint64_t n = 0;
  for (const auto& [k, v] : storage_errors_) n += v;
  return n;
}

std::map<std::string, Metrics::Breakdown> Metrics::stored_by_target() const {
  std::lock_guard lock(mu_);
  return by_target_;
}

std::map<std::string, Metrics::Breakdown> Metrics::stored_by_mode() const {
  std::lock_guard lock(mu_);
  return by_mode_;
}

void Metrics::resp_command(std::string_view command, std::string_view type, std::string_view result) {
  std::lock_guard lock(mu_);
  ++resp_[{std::string(command), std::string(type), std::string(result)}];
}

std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> Metrics::resp_commands() const {
  std::lock_guard lock(mu_);
  return resp_;
}

double Metrics::uptime_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

std::string Metrics::render_prometheus(const Gauges& g) const {
  auto load = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  std::string out;
  out.reserve(8192);
  {
    std::lock_guard lock(mu_);
    family(out, "kcache_http_requests_total", "counter", "HTTP requests answered, by route template, method and status.");
    for (const auto& [k, v] : requests_) {
      const auto& [route, method, status] = k;
      out += "kcache_http_requests_total{route=\"" + prometheus_escape(route) + "\",method=\"" +
             prometheus_escape(method) + "\",status=\"" + std::to_string(status) + "\"} " + std::to_string(v) + "\n";
    }
    family(out, "kcache_http_request_duration_seconds", "histogram",
           "Time from a request's complete headers to its response written, by route template.");
    for (const auto& [route, h] : latency_) {
      std::string lbl = "route=\"" + prometheus_escape(route) + "\"";
      std::uint64_t cum = 0;
      for (std::size_t i = 0; i < k_bounds.size(); ++i) {
        cum += h.counts[i];
        out += "kcache_http_request_duration_seconds_bucket{" + lbl + ",le=\"" + num(k_bounds[i]) + "\"} " +
               std::to_string(cum) + "\n";
      }
      out += "kcache_http_request_duration_seconds_bucket{" + lbl + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
      out += "kcache_http_request_duration_seconds_sum{" + lbl + "} " + num(h.sum) + "\n";
      out += "kcache_http_request_duration_seconds_count{" + lbl + "} " + std::to_string(h.count) + "\n";
    }
    family(out, "kcache_storage_errors_total", "counter", "Storage calls that failed unexpectedly, by operation.");
    for (const auto& [op, v] : storage_errors_) {
      out += "kcache_storage_errors_total{op=\"" + prometheus_escape(op) + "\"} " + std::to_string(v) + "\n";
    }
    family(out, "kcache_stored_by_target_total", "counter", "Uploads stored by this process, by target.");
    for (const auto& [t, b] : by_target_) {
      out += "kcache_stored_by_target_total{target=\"" + prometheus_escape(t) + "\"} " + std::to_string(b.stored) + "\n";
    }
    family(out, "kcache_resp_commands_total", "counter",
           "RESP key commands, by command, the key's cache type and the result.");
    for (const auto& [k, v] : resp_) {
      const auto& [cmd, type, result] = k;
      out += "kcache_resp_commands_total{command=\"" + prometheus_escape(cmd) + "\",type=\"" + prometheus_escape(type) +
             "\",result=\"" + prometheus_escape(result) + "\"} " + std::to_string(v) + "\n";
    }
    family(out, "kcache_stored_by_mode_total", "counter", "Uploads stored by this process, by mode.");
    for (const auto& [m, b] : by_mode_) {
      out += "kcache_stored_by_mode_total{mode=\"" + prometheus_escape(m) + "\"} " + std::to_string(b.stored) + "\n";
    }
  }
  scalar(out, "kcache_cache_hits_total", "counter", "Artifact GETs answered 200.", load(hits));
  family(out, "kcache_hot_tier_hits_total", "counter",
         "Reads answered from the in-memory hot tier on the connection's strand, by API.");
  out += "kcache_hot_tier_hits_total{api=\"http\"} " + std::to_string(load(hot_hits_http)) + "\n";
  out += "kcache_hot_tier_hits_total{api=\"resp\"} " + std::to_string(load(hot_hits_resp)) + "\n";
  scalar(out, "kcache_cache_misses_total", "counter", "Artifact GETs answered 404.", load(misses));
  family(out, "kcache_uploads_total", "counter", "Artifact PUTs by outcome.");
  out += "kcache_uploads_total{outcome=\"stored\"} " + std::to_string(load(puts_stored)) + "\n";
  out += "kcache_uploads_total{outcome=\"already_present\"} " + std::to_string(load(puts_present)) + "\n";
  out += "kcache_uploads_total{outcome=\"rejected\"} " + std::to_string(load(puts_rejected)) + "\n";
  scalar(out, "kcache_received_bytes_total", "counter", "Request body bytes received.", bytes_in());
  scalar(out, "kcache_sent_bytes_total", "counter", "Response body bytes sent.", bytes_out());
  scalar(out, "kcache_storage_list_entries_copied_total", "counter",
         "Index entries copied out of storage to answer listings (GET /v1/entries, the /v1/stats scan).",
         storage::index_entries_copied());
  scalar(out, "kcache_evictions_total", "counter", "Entries evicted through POST /v1/evict.", load(evicted_entries));
  scalar(out, "kcache_evicted_bytes_total", "counter", "Bytes evicted through POST /v1/evict.", load(evicted_bytes));
  scalar(out, "kcache_verify_corrupt_total", "counter", "Corrupt objects found by POST /v1/verify.", load(verify_corrupt));
  // Reported by ranks (POST /v1/cold-start, docs/cold-start.md).
  const struct {
    const char* name;
    const char* help;
    const std::atomic<std::uint64_t>& value;
  } reported[] = {
      {"kcache_eager_block_calls_total",
       "Block calls that ran eagerly while their region compiled off the training thread (reported by ranks).",
       eager_block_calls},
      {"kcache_regions_switched_total",
       "Blocks' regions that landed and were switched to after an eager phase (reported by ranks).", regions_switched},
      {"kcache_background_refusals_total",
       "Regions a compile worker could not rebuild, compiled on the training thread (reported by ranks).",
       background_refusals},
      {"kcache_background_faults_total",
       "Compile workers that died or passed their deadline or memory bound (reported by ranks).", background_faults},
  };
  for (const auto& r : reported) scalar(out, r.name, "counter", r.help, load(r.value));
  family(out, "kcache_background_compile_seconds_total", "counter",
         "Compile seconds ranks' compile workers spent off the training thread (reported by ranks).");
  out += "kcache_background_compile_seconds_total " + num(static_cast<double>(load(background_compile_ms)) / 1000.0) +
         "\n";
  scalar(out, "kcache_leases_granted_total", "counter", "Leases granted.", g.leases.granted);
  scalar(out, "kcache_leases_renewed_total", "counter", "Lease renewals accepted.", g.leases.renewed);
  scalar(out, "kcache_leases_released_total", "counter", "Leases released by their holder.", g.leases.released);
  scalar(out, "kcache_leases_expired_total", "counter", "Leases that ran out without renewal or release.", g.leases.expired);
  scalar(out, "kcache_leases_waited_total", "counter", "Artifact GETs that waited on a live lease.", load(leases_waited));
  scalar(out, "kcache_lease_waits_fulfilled_total", "counter", "Waiting GETs that received the artifact.",
         load(waits_fulfilled));
  scalar(out, "kcache_leases_active", "gauge", "Live leases.", g.leases.active);
  scalar(out, "kcache_lease_waiters", "gauge", "GETs waiting on a lease right now.", g.waiters);
  scalar(out, "kcache_connections_active", "gauge", "Open client connections.", g.connections_active);
  scalar(out, "kcache_connections_accepted_total", "counter", "Connections accepted.", load(connections_accepted));
  scalar(out, "kcache_connections_rejected_total", "counter", "Connections refused with 503 (over --max-connections).",
         load(connections_rejected));
  scalar(out, "kcache_resp_auth_timeouts_total", "counter",
         "RESP connections closed for not authenticating within --resp-auth-timeout-ms.",
         load(resp_auth_timeouts));
  if (g.entries) scalar(out, "kcache_entries", "gauge", "Entries in storage.", *g.entries);
  if (g.bytes) scalar(out, "kcache_stored_bytes", "gauge", "Bytes in storage.", *g.bytes);
  if (g.capacity_bytes) {
    scalar(out, "kcache_capacity_bytes", "gauge", "Storage byte budget (0: unlimited).", *g.capacity_bytes);
  }
  if (const auto& c = g.cluster) {
    // Fixed label sets: every series is written, zeros included.
    family(out, "kcache_redis_cluster_redirects_total", "counter",
           "Redirects the Redis Cluster router followed for storage calls, by kind.");
    out += "kcache_redis_cluster_redirects_total{kind=\"moved\"} " + std::to_string(c->moved) + "\n";
    out += "kcache_redis_cluster_redirects_total{kind=\"ask\"} " + std::to_string(c->ask) + "\n";
    family(out, "kcache_redis_cluster_retries_total", "counter",
           "Storage call rounds the Redis Cluster router retried, by reason (redirects not included).");
    out += "kcache_redis_cluster_retries_total{reason=\"tryagain\"} " + std::to_string(c->tryagain) + "\n";
    out += "kcache_redis_cluster_retries_total{reason=\"clusterdown\"} " + std::to_string(c->clusterdown) + "\n";
    out += "kcache_redis_cluster_retries_total{reason=\"node_error\"} " + std::to_string(c->node_errors) + "\n";
    scalar(out, "kcache_redis_cluster_slot_map_refreshes_total", "counter",
           "Slot maps the Redis Cluster router read and installed, the first included.", c->refreshes);
    scalar(out, "kcache_redis_cluster_failed_calls_total", "counter",
           "Storage calls the Redis Cluster router gave up on (unavailable or timeout) after its retries.", c->failed);
  }
  render_namespaces(out, g);
  family(out, "kcache_uptime_seconds", "gauge", "Seconds since the server started.");
  out += "kcache_uptime_seconds " + num(uptime_seconds()) + "\n";
  return out;
}

}  // namespace kcache::server
