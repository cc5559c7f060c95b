// /healthz, /readyz, /metrics, /v1/stats, /v1/entries[/{key}], /v1/evict,
// /v1/verify.
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <nlohmann/json.hpp>

#include "artifact/bundle.hpp"
#include "server/http/bundle_check.hpp"
#include "server/http/handlers.hpp"
#include "server/parse_uint.hpp"
#include "server/services.hpp"
#include "storage/capabilities.hpp"
#include "storage/entry_query.hpp"
#include "storage/retention.hpp"
#include "storage/fault_hook.hpp"

namespace kcache::server {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// Entries scanned at most for the per-target and per-mode breakdown.
constexpr std::size_t k_max_breakdown_entries = 200'000;

json entry_json(const storage::Entry& e, std::int64_t window_ms) {
  return {{"key", e.key},
          {"pinned", e.pinned},
          {"value", storage::entry_value(e, storage::now_ms(), window_ms)},
          {"size", e.size},
          {"created_ms", e.created_ms},
          {"last_access_ms", e.last_access_ms},
          {"hits", e.hits},
          {"label", e.meta.label},
          {"target", e.meta.target},
          {"mode", e.meta.mode},
          {"dtype", e.meta.dtype},
          {"toolchain", e.meta.toolchain},
          {"compile_ms", e.meta.compile_ms}};
}

Gauges sample_gauges(Services& s, const Result<storage::Usage>& u, const LeaseCounters& leases) {
  Gauges g;
  if (u) {
    g.entries = u->entries;
    g.bytes = u->bytes;
    g.capacity_bytes = u->capacity_bytes;
  }
  g.leases = leases;
  g.connections_active = s.connections_active ? s.connections_active() : 0;
  g.waiters = s.waiters.count();
  if (auto* router = storage::capability<storage::HasClusterRouter>(s.backend)) g.cluster = router->cluster_counts();
  return g;
}

// Every namespace's usage against its quota. Blocking: on the pool.
std::vector<Gauges::Namespace> sample_namespaces(Services& s) {
  std::vector<Gauges::Namespace> out;
  for (const auto& ns : s.namespaces.all()) {
    Gauges::Namespace n{ns->name(), std::nullopt, std::nullopt, ns->spec.quota_bytes, ns->spec.quota_entries};
    if (auto u = ns->store->usage()) {
      n.entries = u->entries;
      n.bytes = u->bytes;
    } else {
      s.metrics.storage_error("usage");
    }
    out.push_back(std::move(n));
  }
  return out;
}

asio::awaitable<Response> readyz(Services& s) {
  if (s.draining.load()) co_return error_response(503, "shutting_down", "the server is draining");
  auto st_job = [&s] { return s.backend.ping(); };
  auto st = co_await run_blocking(s.pool, st_job);
  if (!st) {
    s.metrics.storage_error("ping");
    co_return error_response(503, "storage_unavailable", st.error().message);
  }
  co_return json_response(200, {{"status", "ready"}, {"storage", s.backend.name()}});
}

asio::awaitable<Response> metrics(Services& s) {
  struct Sample {
    Result<storage::Usage> usage;
    LeaseCounters leases;
    std::vector<Gauges::Namespace> namespaces;
  };
  auto u_job = [&s] { return Sample{s.backend.usage(), s.leases.counters(), sample_namespaces(s)}; };
  auto u = co_await run_blocking(s.pool, u_job);
  if (!u.usage) s.metrics.storage_error("usage");
  Gauges g = sample_gauges(s, u.usage, u.leases);
  g.namespaces = std::move(u.namespaces);
  co_return text_response(200, s.metrics.render_prometheus(g), "text/plain; version=0.0.4; charset=utf-8");
}

using storage::Tally;

// The per-target and per-mode breakdown: the backend's own counters
// (memory, disk), else a scan of the whole store (redis).
struct Breakdown {
  std::map<std::string, Tally> by_target, by_mode;
  bool truncated = false;
  std::optional<Error> error;
};

// One page as large as the breakdown may be: every list() call snapshots
// and sorts the whole index (storage/entry_query.cpp), so pages of 1000 made
// a scan of n entries cost n / 1000 snapshots (40,000 entries: 1.4 s of CPU).
Breakdown scan_breakdown(storage::Backend& backend) {
  Breakdown sc;
  storage::ListQuery q;
  q.limit = k_max_breakdown_entries;
  auto page = backend.list(q);
  if (!page) {
    sc.error = page.error();
    return sc;
  }
  for (const auto& e : page->entries) {
    for (auto* t : {&sc.by_target[e.meta.target], &sc.by_mode[e.meta.mode]}) {
      ++t->entries;
      t->bytes += e.size;
      t->hits += e.hits;
    }
  }
  sc.truncated = !page->next_cursor.empty();
  return sc;
}

// One scan at a time: a request that finds one running waits for it (a
// timer on its own strand, no pool thread held) and shares its result —
// which began before that request arrived, so it can miss what landed in
// between, by one scan's duration at most. However many ask at once, one
// thread scans.
asio::awaitable<std::shared_ptr<const Breakdown>> shared_breakdown(Services& s) {
  AdminWork& w = *s.admin;
  auto ex = co_await asio::this_coro::executor;
  std::shared_ptr<asio::steady_timer> wait;
  {
    std::lock_guard lock(w.mu);
    if (w.scanning) {
      wait = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
      w.on_scanned.push_back([wait] { asio::post(wait->get_executor(), [wait] { wait->cancel(); }); });
    } else {
      w.scanning = true;
    }
  }
  if (wait) {
    // The wake-up is posted to this strand, so it cannot run before this wait starts.
    boost::system::error_code ec;
    co_await wait->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    std::shared_ptr<const void> last;
    {
      std::lock_guard lock(w.mu);
      last = w.last_scan;
    }
    if (last) co_return std::static_pointer_cast<const Breakdown>(last);
    auto own_job = [&s] { return std::make_shared<const Breakdown>(scan_breakdown(s.backend)); };
    co_return co_await run_blocking(s.pool, own_job);  // the scan it waited for failed to finish
  }
  struct Finish {  // however the scan ends: not scanning any more, waiters woken
    AdminWork& w;
    std::shared_ptr<const Breakdown> result;
    ~Finish() {
      std::vector<std::function<void()>> wake;
      {
        std::lock_guard lock(w.mu);
        w.last_scan = result;
        w.scanning = false;
        wake.swap(w.on_scanned);
      }
      for (auto& f : wake) f();
    }
  } finish{w, nullptr};
  auto scan_job = [&s] {
    auto b = std::make_shared<const Breakdown>(scan_breakdown(s.backend));
    storage::fault_pause("KCACHE_FAULT_PAUSE_SCAN_MS", "stats scan");  // tests only
    return b;
  };
  finish.result = co_await run_blocking(s.pool, scan_job);
  co_return finish.result;
}

// The namespaces this request's credentials may read, with their usage,
// quotas, policies and counters (docs/namespaces.md).
json namespaces_json(Services& s, const std::vector<std::string>& visible,
                     const std::vector<Gauges::Namespace>& sampled) {
  const auto counters = s.metrics.namespace_counters();
  json arr = json::array();
  for (const auto& g : sampled) {
    if (std::find(visible.begin(), visible.end(), g.name) == visible.end()) continue;
    auto ns = s.namespaces.find(g.name);
    if (!ns) continue;
    NamespaceCounters c;
    if (auto it = counters.find(g.name); it != counters.end()) c = it->second;
    arr.push_back({{"name", g.name},
                   {"entries", g.entries ? json(*g.entries) : json(nullptr)},
                   {"bytes", g.bytes ? json(*g.bytes) : json(nullptr)},
                   {"quota_bytes", g.quota_bytes},
                   {"quota_entries", g.quota_entries},
                   {"trust", ns->spec.signed_only ? "signed" : "any"},
                   {"retention", ns->spec.retention == RetentionPolicy::value ? "value" : "lru"},
                   {"retention_window_s", ns->spec.value_window_ms / 1000},
                   {"read_through", ns->spec.read_through},
                   {"hits", c.hits},
                   {"misses", c.misses},
                   {"read_through_hits", c.read_through_hits},
                   {"uploads", {{"stored", c.stored}, {"rejected", c.rejected}, {"quota_refused", c.quota_refused}}},
                   {"quota_evictions", {{"entries", c.quota_evicted_entries}, {"bytes", c.quota_evicted_bytes}}}});
  }
  return arr;
}

asio::awaitable<Response> stats(Services& s, Request& req, const NamespacePtr& ns) {
  struct Scan {
    Result<storage::Usage> usage;
    std::shared_ptr<const Breakdown> breakdown;
    LeaseCounters leases;
    std::optional<storage::Breakdown> kept;  // the backend's counters, where it keeps them
    std::vector<Gauges::Namespace> namespaces;
  };
  storage::Backend& store = *ns->store;
  const bool own_store = &store == &s.backend;
  auto scan_job = [&s, &store, own_store] {
    Scan scan{store.usage(), nullptr, s.leases.counters(), std::nullopt, sample_namespaces(s)};
    if (auto* kept = storage::capability<storage::KeepsBreakdown>(store)) scan.kept = kept->breakdown();
    // Another namespace's store is scanned here, unshared (the shared scan is the default store's).
    if (!scan.kept && !own_store) scan.breakdown = std::make_shared<const Breakdown>(scan_breakdown(store));
    return scan;
  };
  auto scan = co_await run_blocking(s.pool, scan_job);
  if (scan.kept) {
    auto b = std::make_shared<Breakdown>();
    b->by_target = std::move(scan.kept->by_target);
    b->by_mode = std::move(scan.kept->by_mode);
    scan.breakdown = std::move(b);
  } else if (!scan.breakdown) {
    scan.breakdown = co_await shared_breakdown(s);
  }
  if (!scan.usage) s.metrics.storage_error("usage");
  if (scan.breakdown->error) s.metrics.storage_error("list");
  Gauges g = sample_gauges(s, scan.usage, scan.leases);
  auto& m = s.metrics;
  auto load = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  auto breakdown = [](const std::map<std::string, Tally>& tallies, const std::map<std::string, Metrics::Breakdown>& stored) {
    json out = json::object();
    for (const auto& [name, t] : tallies) {
      out[name] = {{"entries", t.entries}, {"bytes", t.bytes}, {"hits", t.hits}, {"uploads_stored", 0}};
    }
    for (const auto& [name, b] : stored) {
      if (!out.contains(name)) out[name] = {{"entries", 0}, {"bytes", 0}, {"hits", 0}};
      out[name]["uploads_stored"] = b.stored;
    }
    return out;
  };
  std::uint64_t hits = load(m.hits), misses = load(m.misses);
  json resp = json::object();  // RESP endpoint: per cache type, "<command>_<result>" counts
  for (const auto& [k, v] : m.resp_commands()) {
    const auto& [cmd, type, result] = k;
    resp[type][cmd + "_" + result] = v;
  }
  json body = {
      {"uptime_s", m.uptime_seconds()},
      {"backend", s.backend.name()},
      {"namespace", ns->name()},
      {"namespaces", namespaces_json(s, s.authorizer.namespaces_of(req, Role::read), scan.namespaces)},
      {"storage", scan.usage ? json{{"entries", scan.usage->entries},
                                    {"bytes", scan.usage->bytes},
                                    {"capacity_bytes", scan.usage->capacity_bytes}}
                             : json(nullptr)},
      {"requests", m.requests_total()},
      {"bytes_in", m.bytes_in()},
      {"bytes_out", m.bytes_out()},
      {"hits", hits},
      {"misses", misses},
      {"hit_ratio", hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0},
      {"uploads", {{"stored", load(m.puts_stored)}, {"already_present", load(m.puts_present)},
                   {"rejected", load(m.puts_rejected)}}},
      {"evictions", {{"entries", load(m.evicted_entries)}, {"bytes", load(m.evicted_bytes)}}},
      {"leases", {{"active", g.leases.active}, {"granted", g.leases.granted}, {"renewed", g.leases.renewed},
                  {"released", g.leases.released}, {"expired", g.leases.expired},
                  {"waited", load(m.leases_waited)}, {"waits_fulfilled", load(m.waits_fulfilled)},
                  {"waiting_now", g.waiters}}},
      {"storage_errors", m.storage_errors_total()},
      {"connections", {{"active", g.connections_active}, {"accepted", load(m.connections_accepted)},
                       {"rejected", load(m.connections_rejected)}}},
      {"by_target", breakdown(scan.breakdown->by_target, m.stored_by_target())},
      {"by_mode", breakdown(scan.breakdown->by_mode, m.stored_by_mode())},
      {"breakdown_truncated", scan.breakdown->truncated},
      {"resp", resp},
  };
  co_return json_response(200, body);
}

asio::awaitable<Response> entries(Services& s, Request& req, const NamespacePtr& ns) {
  storage::ListQuery q;
  q.value_window_ms = ns->spec.value_window_ms;
  q.limit = 100;
  for (const auto& [k, v] : req.query) {
    if (k == "label_prefix") q.label_prefix = v;
    else if (k == "target") q.target = v;
    else if (k == "mode") q.mode = v;
    else if (k == "toolchain") q.toolchain = v;
    else if (k == "cursor") q.cursor = v;
    else if (k == "order") {
      if (v != "asc" && v != "desc") co_return error_response(400, "bad_query", "order is asc or desc");
      q.descending = v == "desc";
    } else if (k == "sort") {
      static const std::map<std::string, storage::SortBy> sorts = {
          {"key", storage::SortBy::key}, {"size", storage::SortBy::size},
          {"last_access", storage::SortBy::last_access}, {"hits", storage::SortBy::hits},
          {"created", storage::SortBy::created}, {"value", storage::SortBy::value}};
      auto it = sorts.find(v);
      if (it == sorts.end()) {
        co_return error_response(400, "bad_query", "sort is one of key, size, last_access, hits, created, value");
      }
      q.sort = it->second;
    } else if (k == "limit") {
      auto n = parse_uint(v);
      if (!n || *n < 1 || *n > 1000) co_return error_response(400, "bad_query", "limit is 1..1000");
      q.limit = *n;
    } else {
      co_return error_response(400, "bad_query", "unknown query parameter '" + k.substr(0, 64) + "'");
    }
  }
  auto page_job = [&ns, &q] { return ns->store->list(q); };
  auto page = co_await run_blocking(s.pool, page_job);
  if (!page) {
    if (page.error().code == Errc::invalid_argument) co_return error_response(400, "bad_query", page.error().message);
    co_return storage_failure(s, "list", page.error());
  }
  json arr = json::array();
  for (const auto& e : page->entries) arr.push_back(entry_json(e, ns->spec.value_window_ms));
  co_return json_response(200, {{"entries", arr},
                                {"namespace", ns->name()},
                                {"next_cursor", page->next_cursor.empty() ? json(nullptr) : json(page->next_cursor)}});
}

asio::awaitable<Response> entry(Services& s, const NamespacePtr& ns, const std::string& key) {
  // Each reads the bundle's header, manifest (up to --max-body-bytes) and
  // section table: a few at a time, so readers cannot make the server hold
  // many manifests at once.
  struct Slot {
    std::atomic<unsigned>& n;
    bool held;
    ~Slot() {
      if (held) n.fetch_sub(1);
    }
  } slot{s.admin->inspections, s.admin->inspections.fetch_add(1) < AdminWork::k_max_inspections};
  if (!slot.held) {
    s.admin->inspections.fetch_sub(1);
    auto r = error_response(503, "busy", "other entry inspections are running; retry shortly");
    r.set("Retry-After", "1");
    co_return r;
  }
  // The parts of the object inspection needs, read by range: never the
  // section data, so a 1 GiB entry costs what a 1 KiB one does. The
  // trailer is reported as stored, not recomputed (bundle.digest_checked
  // false); GET and /v1/verify hash whole objects.
  struct Found {
    Result<storage::Entry> head;
    std::optional<Result<artifact::BundleSummary>> summary;
    std::optional<Error> storage_error;  // a read that failed for a reason other than the object's bytes
  };
  // Its own store first, then the namespaces it reads through (read-only):
  // `kcache explain` then says where a read-through hit comes from.
  const auto chain = s.namespaces.read_chain(ns);
  storage::Backend* where = ns->store;
  NamespacePtr found_in = ns;
  auto f_job = [&chain, &key, &where, &found_in] {
    Found out{chain[0]->store->head(key), std::nullopt, std::nullopt};
    for (std::size_t i = 1; i < chain.size() && !out.head && out.head.error().code == Errc::not_found; ++i) {
      auto h = chain[i]->store->head(key);
      if (h) {
        out.head = std::move(h);
        where = chain[i]->store;
        found_in = chain[i];
      }
    }
    if (!out.head) return out;
    storage::Backend& store = *where;
    artifact::RangeReader read = [&](std::uint64_t offset, std::uint64_t length) {
      auto got = store.read_range(key, offset, length);
      if (!got && got.error().code != Errc::corrupt) out.storage_error = got.error();
      return got;
    };
    out.summary = artifact::inspect_bundle_ranges(out.head->size, read);
    return out;
  };
  auto f = co_await run_blocking(s.pool, f_job);
  if (!f.head) {
    if (f.head.error().code == Errc::not_found) co_return error_response(404, "not_found", "no entry " + key);
    co_return storage_failure(s, "head", f.head.error());
  }
  if (f.storage_error) {
    if (f.storage_error->code == Errc::not_found) co_return error_response(404, "not_found", "no entry " + key);
    co_return storage_failure(s, "read_range", *f.storage_error);
  }
  const auto& summary = *f.summary;
  json body = {{"entry", entry_json(*f.head, found_in->spec.value_window_ms)},
              {"namespace", found_in->name()},
              {"read_through", found_in != ns}};
  if (summary) {
    json sections = json::array();
    for (const auto& sec : summary->sections) {
      sections.push_back({{"name", sec.name}, {"compressed_bytes", sec.compressed_bytes},
                          {"uncompressed_bytes", sec.uncompressed_bytes}, {"sha256", sec.sha256_hex}});
    }
    body["bundle"] = {{"format_version", summary->format_version}, {"digest", summary->digest_hex},
                      {"digest_checked", summary->trailer_checked},
                      {"total_bytes", summary->total_bytes},
                      {"signer_key_id", summary->signer_key_id ? json(*summary->signer_key_id) : json(nullptr)},
                      {"sections", sections}};
    body["manifest"] = summary->manifest;
  } else {
    body["bundle"] = nullptr;
    body["manifest"] = nullptr;
    body["bundle_error"] = {{"error", errc_name(summary.error().code)}, {"message", summary.error().message}};
  }
  co_return json_response(200, body);
}

}  // namespace

asio::awaitable<Response> handle_admin(Services& s, Request& req, const RouteMatch& m) {
  switch (m.id) {
    case RouteId::healthz: co_return json_response(200, {{"status", "ok"}});
    case RouteId::readyz: co_return co_await readyz(s);
    case RouteId::metrics: co_return co_await metrics(s);
    case RouteId::ui:
    case RouteId::ui_overview: co_return co_await handle_ui(s, req, m);
    case RouteId::cold_start: co_return handle_cold_start(s, req);
    default: break;
  }
  auto ns = s.namespaces.find(m.ns);
  if (!ns) co_return namespace_gone(m.ns);
  switch (m.id) {
    case RouteId::stats: co_return co_await stats(s, req, ns);
    case RouteId::entries: co_return co_await entries(s, req, ns);
    case RouteId::entry: co_return co_await entry(s, ns, m.key);
    case RouteId::entry_pin:
    case RouteId::evict:
    case RouteId::verify: co_return co_await handle_upkeep(s, req, m, ns);
    default: co_return error_response(500, "internal", "unrouted request");
  }
}

}  // namespace kcache::server
