// Metrics' namespace counters and their Prometheus families
// (server/metrics.hpp). Label values come from the configured namespace
// names only (server/http_front/namespace_file.hpp), so a client cannot grow the
// label set.
#include <string>

#include "server/metrics.hpp"

namespace kcache::server {

namespace {

void head(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void line(std::string& out, const char* name, const std::string& ns, std::uint64_t v) {
  out += std::string(name) + "{namespace=\"" + prometheus_escape(ns) + "\"} " + std::to_string(v) + "\n";
}

}  // namespace

void Metrics::ns_event(const std::string& ns, NsEvent e) {
  std::lock_guard lock(mu_);
  auto& c = ns_[ns];
  switch (e) {
    case NsEvent::hit: ++c.hits; break;
    case NsEvent::miss: ++c.misses; break;
    case NsEvent::stored: ++c.stored; break;
    case NsEvent::rejected: ++c.rejected; break;
    case NsEvent::quota_refused: ++c.rejected, ++c.quota_refused; break;
  }
}

void Metrics::ns_read_through_hit(const std::string& ns, const std::string& from) {
  std::lock_guard lock(mu_);
  ++ns_[ns].read_through_hits[from];
}

void Metrics::ns_quota_evicted(const std::string& ns, std::uint64_t entries, std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto& c = ns_[ns];
  c.quota_evicted_entries += entries;
  c.quota_evicted_bytes += bytes;
}

std::map<std::string, NamespaceCounters> Metrics::namespace_counters() const {
  std::lock_guard lock(mu_);
  return ns_;
}

void Metrics::render_namespaces(std::string& out, const Gauges& g) const {
  if (g.namespaces.empty()) return;
  const auto counters = namespace_counters();
  auto of = [&](const std::string& ns) {
    auto it = counters.find(ns);
    return it == counters.end() ? NamespaceCounters{} : it->second;
  };
  // Every configured namespace gets every series, zeros included.
  struct Counter {
    const char* name;
    const char* help;
    std::uint64_t NamespaceCounters::*field;
  };
  static const Counter k_counters[] = {
      {"kcache_namespace_hits_total", "Artifact GETs answered 200, by namespace (read-through hits included).",
       &NamespaceCounters::hits},
      {"kcache_namespace_misses_total", "Artifact GETs answered 404, by namespace.", &NamespaceCounters::misses},
      {"kcache_namespace_uploads_stored_total", "Uploads stored, by namespace.", &NamespaceCounters::stored},
      {"kcache_namespace_uploads_rejected_total", "Uploads refused, by namespace (quota refusals included).",
       &NamespaceCounters::rejected},
      {"kcache_namespace_quota_refusals_total", "Uploads refused because they did not fit the namespace's quota.",
       &NamespaceCounters::quota_refused},
      {"kcache_namespace_quota_evictions_total", "Entries evicted to make room for an upload within the quota.",
       &NamespaceCounters::quota_evicted_entries},
      {"kcache_namespace_quota_evicted_bytes_total", "Bytes evicted to make room for an upload within the quota.",
       &NamespaceCounters::quota_evicted_bytes},
  };
  for (const auto& c : k_counters) {
    head(out, c.name, "counter", c.help);
    for (const auto& n : g.namespaces) line(out, c.name, n.name, of(n.name).*(c.field));
  }
  head(out, "kcache_namespace_read_through_hits_total", "counter",
       "Artifact GETs that missed in their namespace and hit in a read-through one, by namespace and source.");
  for (const auto& n : g.namespaces) {
    for (const auto& [from, v] : of(n.name).read_through_hits) {
      out += "kcache_namespace_read_through_hits_total{namespace=\"" + prometheus_escape(n.name) + "\",from=\"" +
             prometheus_escape(from) + "\"} " + std::to_string(v) + "\n";
    }
  }
  head(out, "kcache_namespace_entries", "gauge", "Entries stored, by namespace.");
  for (const auto& n : g.namespaces) {
    if (n.entries) line(out, "kcache_namespace_entries", n.name, *n.entries);
  }
  head(out, "kcache_namespace_stored_bytes", "gauge", "Bytes stored, by namespace.");
  for (const auto& n : g.namespaces) {
    if (n.bytes) line(out, "kcache_namespace_stored_bytes", n.name, *n.bytes);
  }
  head(out, "kcache_namespace_quota_bytes", "gauge", "The namespace's byte quota (0: none).");
  for (const auto& n : g.namespaces) line(out, "kcache_namespace_quota_bytes", n.name, n.quota_bytes);
  head(out, "kcache_namespace_quota_entries", "gauge", "The namespace's entry quota (0: none).");
  for (const auto& n : g.namespaces) line(out, "kcache_namespace_quota_entries", n.name, n.quota_entries);
}

}  // namespace kcache::server
