// GET /ui (the web page, --ui) and GET /v1/ui/overview (its data): per
// namespace the request's credentials may read, usage against the quota,
// policies, the last day's per-minute history (server/history.hpp), the top
// entries by value, recent misses and leases in flight. docs/ui.md.
#include <nlohmann/json.hpp>

#include "server/http/handlers.hpp"
#include "server/services.hpp"
#include "server/ui/page.hpp"
#include "storage/entry_query.hpp"
#include "storage/retention.hpp"

namespace kcache::server {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

constexpr std::size_t k_top = 10;

json window_totals(const History::Series& s, std::size_t minutes) {
  std::uint64_t hits = 0, misses = 0;
  double saved = 0;
  for (std::size_t i = s.hits.size() - std::min(minutes, s.hits.size()); i < s.hits.size(); ++i) {
    hits += s.hits[i];
    misses += s.misses[i];
    saved += s.compile_s_saved[i];
  }
  return {{"hits", hits},
          {"misses", misses},
          {"hit_ratio", hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0},
          {"compile_s_saved", saved}};
}

// One namespace's card. Blocking (storage, lease table): on the pool.
json card(Services& s, const Namespace& ns, const std::vector<LeaseInfo>& leases, std::int64_t now) {
  json c = {{"name", ns.name()},
            {"quota_bytes", ns.spec.quota_bytes},
            {"quota_entries", ns.spec.quota_entries},
            {"retention", ns.spec.retention == RetentionPolicy::value ? "value" : "lru"},
            {"trust", ns.spec.signed_only ? "signed" : "any"},
            {"read_through", ns.spec.read_through}};
  auto u = ns.store->usage();
  c["entries"] = u ? json(u->entries) : json(nullptr);
  c["bytes"] = u ? json(u->bytes) : json(nullptr);
  if (!u) s.metrics.storage_error("usage");
  const auto series = s.history.series(ns.name(), now);
  c["hour"] = window_totals(series, 60);
  c["day"] = window_totals(series, History::k_minutes);
  c["series"] = {{"start_ms", series.start_ms}, {"step_s", 60}, {"hits", series.hits},
                 {"misses", series.misses}, {"compile_s_saved", series.compile_s_saved}};
  storage::ListQuery q;
  q.sort = storage::SortBy::value;
  q.descending = true;
  q.limit = k_top;
  q.value_window_ms = ns.spec.value_window_ms;
  json top = json::array();
  if (auto page = ns.store->list(q)) {
    for (const auto& e : page->entries) {
      top.push_back({{"key", e.key}, {"label", e.meta.label}, {"size", e.size}, {"hits", e.hits},
                     {"compile_ms", e.meta.compile_ms}, {"pinned", e.pinned},
                     {"value", storage::entry_value(e, now, ns.spec.value_window_ms)}});
    }
  } else {
    s.metrics.storage_error("list");
  }
  c["top"] = std::move(top);
  json misses = json::array();
  for (const auto& m : s.history.recent_misses(ns.name())) {
    misses.push_back({{"key", m.key},
                      {"time_ms", m.time_ms},
                      {"explained", m.explanation.empty() ? json(nullptr) : json::parse(m.explanation, nullptr, false)}});
  }
  c["recent_misses"] = std::move(misses);
  json ls = json::array();
  for (const auto& l : leases) {
    auto key = unscoped_key(ns.name(), l.key);
    if (!key) continue;
    ls.push_back({{"key", *key}, {"holder", l.holder}, {"age_ms", l.age_ms},
                  {"remaining_ms", l.remaining_ms}});
  }
  c["leases"] = std::move(ls);
  return c;
}

}  // namespace

asio::awaitable<Response> handle_ui(Services& s, Request& req, const RouteMatch& m) {
  if (!s.config.ui) co_return error_response(404, "not_found", "the web page is off (start the server with --ui)");
  if (m.id == RouteId::ui) co_return text_response(200, ui_page(), "text/html; charset=utf-8");
  const auto visible = s.authorizer.namespaces_of(req, Role::read);
  auto job = [&s, &visible] {
    const auto now = storage::now_ms();
    const auto leases = s.leases.list();
    json cards = json::array();
    for (const auto& ns : s.namespaces.all()) {
      if (std::find(visible.begin(), visible.end(), ns->name()) == visible.end()) continue;
      cards.push_back(card(s, *ns, leases, now));
    }
    return json{{"generated_ms", now}, {"uptime_s", s.metrics.uptime_seconds()}, {"backend", s.backend.name()},
                {"namespaces", std::move(cards)}};
  };
  co_return json_response(200, co_await run_blocking(s.pool, job));
}

}  // namespace kcache::server
