// kcache stats: GET /v1/stats and /readyz, plus the compile time the stored
// entries have saved, which the server does not count itself: the sum over
// stored entries of hits × compile time (docs/cli.md says what it misses).
#include <iostream>

#include "cli/commands.hpp"
#include "cli/entries.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

// Entries read at most for the compile-time estimate (as the server's own
// breakdown).
constexpr std::size_t k_max_scan = 200'000;

std::uint64_t u64(const json& j, const char* a, const char* b = nullptr) {
  const json* v = &j;
  for (const char* name : {a, b}) {
    if (!name) break;
    if (!v->is_object() || !v->contains(name)) return 0;
    v = &(*v)[name];
  }
  return v->is_number_unsigned() ? v->get<std::uint64_t>() : 0;
}

std::string num(std::uint64_t v) {
  return std::to_string(v);
}

json health_of(Api& api) {
  auto r = api.raw("GET", "/readyz");
  if (!r) return {{"ready", false}, {"status", "unreachable"}, {"message", r.error().message}};
  auto j = json::parse(r->body, nullptr, false);
  if (r->status == 200) return {{"ready", true}, {"status", "ready"}};
  std::string code = j.is_object() ? j.value("error", "") : "";
  std::string msg = j.is_object() ? j.value("message", "") : "";
  return {{"ready", false},
          {"status", code.empty() ? std::to_string(r->status) : code},
          {"message", msg}};
}

void print_breakdown(const json& by, const std::string& title, const std::string& column) {
  if (!by.is_object() || by.empty()) return;
  std::cout << '\n' << title << '\n';
  Table t({column, "ENTRIES", "BYTES", "HITS", "UPLOADS"},
          {Align::left, Align::right, Align::right, Align::right, Align::right});
  for (const auto& [name, v] : by.items()) {
    t.add({name.empty() ? "(none)" : name, num(u64(v, "entries")), format_bytes(u64(v, "bytes")),
           num(u64(v, "hits")), num(u64(v, "uploads_stored"))});
  }
  t.print(std::cout);
}

// Every namespace the token may read: usage against its quota, policies, hits.
void print_namespaces(const json& list) {
  if (!list.is_array() || list.empty()) return;
  std::cout << "\nnamespaces\n";
  Table t({"NAMESPACE", "ENTRIES", "BYTES", "QUOTA", "USED", "HITS", "MISSES", "READ-THROUGH", "TRUST", "RETENTION",
           "QUOTA EVICTIONS"},
          {Align::left, Align::right, Align::right, Align::right, Align::right, Align::right, Align::right,
           Align::left, Align::left, Align::left, Align::right});
  for (const auto& n : list) {
    const std::uint64_t bytes = u64(n, "bytes"), quota = u64(n, "quota_bytes");
    std::string links;
    for (const auto& r : n.value("read_through", json::array())) links += (links.empty() ? "" : ",") + r.get<std::string>();
    t.add({n.value("name", ""), n["entries"].is_number() ? num(u64(n, "entries")) : "?", format_bytes(bytes),
           quota ? format_bytes(quota) : "none",
           quota ? format_percent(static_cast<double>(bytes) / static_cast<double>(quota)) : "",
           num(u64(n, "hits")), num(u64(n, "misses")), links.empty() ? "-" : links, n.value("trust", ""),
           n.value("retention", ""), num(u64(n, "quota_evictions", "entries"))});
  }
  t.print(std::cout);
}

void print_table(const Api& api, const json& s) {
  const json& st = s["storage"];
  const bool have_storage = st.is_object();
  const std::uint64_t budget = have_storage ? u64(st, "capacity_bytes") : 0;
  std::string used =
      have_storage ? format_bytes(u64(st, "bytes")) : "unknown (storage did not answer)";
  if (have_storage && budget > 0) {
    used += " (" +
            format_percent(static_cast<double>(u64(st, "bytes")) / static_cast<double>(budget)) +
            ")";
  }
  const json& h = s["health"];
  std::string health = h.value("status", "");
  if (!h.value("ready", false) && !h.value("message", "").empty())
    health += ": " + h.value("message", "");
  std::string saved = "unknown";
  if (s["compile_time_saved_s"].is_number()) {
    saved = format_duration(s["compile_time_saved_s"].get<double>()) +
            " (estimate: hits × compile time of " +
            (s.value("compile_time_saved_truncated", false) ? "the first 200000" : "the") +
            " stored entries)";
  }
  const std::uint64_t stored = u64(s, "uploads", "stored"),
                      present = u64(s, "uploads", "already_present");
  print_fields(std::cout,
               {
                   {"server", api.url()},
                   {"version", s.value("version", "").empty() ? "unknown" : s.value("version", "")},
                   {"uptime", format_duration(s.value("uptime_s", 0.0))},
                   {"storage backend", s.value("backend", "")},
                   {"namespace", s.value("namespace", "default")},
                   {"health", health},
                   {"entries", have_storage ? num(u64(st, "entries")) : "unknown"},
                   {"bytes used", used},
                   {"byte budget", budget > 0 ? format_bytes(budget) : "unlimited"},
                   {"hit ratio", format_percent(s.value("hit_ratio", 0.0))},
                   {"hits", num(u64(s, "hits"))},
                   {"misses", num(u64(s, "misses"))},
                   {"puts", num(stored + present) + " (" + num(stored) + " stored, " +
                                num(present) + " already present)"},
                   {"rejected puts", num(u64(s, "uploads", "rejected"))},
                   {"leases granted", num(u64(s, "leases", "granted"))},
                   {"leases renewed", num(u64(s, "leases", "renewed"))},
                   {"leases waited", num(u64(s, "leases", "waited")) + " (" +
                                         num(u64(s, "leases", "waits_fulfilled")) + " fulfilled, " +
                                         num(u64(s, "leases", "waiting_now")) + " waiting now)"},
                   {"leases expired", num(u64(s, "leases", "expired"))},
                   {"leases active", num(u64(s, "leases", "active"))},
                   {"evictions", num(u64(s, "evictions", "entries")) + " (" +
                                     format_bytes(u64(s, "evictions", "bytes")) + ")"},
                   {"storage errors", num(u64(s, "storage_errors"))},
                   {"compile time saved", saved},
               });
  print_namespaces(s["namespaces"]);
  print_breakdown(s["by_target"], "by target", "TARGET");
  print_breakdown(s["by_mode"], "by mode", "MODE");
  if (s.value("breakdown_truncated", false))
    std::cout << "(breakdown over the first 200000 entries)\n";
}

Status run_stats(const Context& ctx, Api& api) {
  auto stats = api.call_json("GET", "/v1/stats", Role::read);
  if (!stats) return stats.error();
  json s = *stats;
  s["server"] = api.url();
  s["version"] = api.server_version();
  s["health"] = health_of(api);
  auto listing = list_entries(api, EntryFilter{}, k_max_scan);
  if (listing) {
    double saved_ms = 0;
    for (const auto& e : listing->entries) {
      saved_ms += static_cast<double>(e.value("hits", 0ull)) *
                  static_cast<double>(e.value("compile_ms", 0ull));
    }
    s["compile_time_saved_s"] = saved_ms / 1000;
    s["compile_time_saved_truncated"] = listing->truncated;
  } else {
    s["compile_time_saved_s"] = nullptr;
  }
  if (ctx.json) {
    std::cout << s.dump(2) << '\n';
  } else {
    print_table(api, s);
  }
  return Ok{};
}

}  // namespace

void add_stats(CLI::App& app, Context& ctx, Commands& out) {
  auto* sub = app.add_subcommand(
      "stats", "counters, usage, hit ratio, leases and health, by target and mode");
  out.push_back(
      {sub, [&ctx] { return with_api(ctx, [&](Api& api) { return run_stats(ctx, api); }); }});
}

}  // namespace kcache::cli
