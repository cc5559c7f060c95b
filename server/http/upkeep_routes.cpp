// POST /v1/evict, POST /v1/verify and PUT/DELETE /v1/entries/{key}/pin:
// what an admin does to a namespace's store (the admin routes that change
// it; the ones that read it are admin_routes.cpp).
#include <nlohmann/json.hpp>

#include "server/http/bundle_check.hpp"
#include "server/http/handlers.hpp"
#include "server/services.hpp"

namespace kcache::server {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// Parses the evict policy; an error response on anything unexpected.
std::variant<storage::EvictPolicy, Response> parse_policy(const std::vector<std::uint8_t>& body) {
  auto j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return error_response(400, "bad_json", "the body is not valid JSON");
  if (!j.is_object()) return error_response(400, "bad_json", "the policy must be a JSON object");
  storage::EvictPolicy p;
  bool any = false;
  for (const auto& item : j.items()) {
    const std::string& k = item.key();  // not a structured binding: clang 14 cannot capture one
    const json& v = item.value();
    auto want_string = [&](std::string& out) -> bool {
      if (!v.is_string()) return false;
      out = v.get<std::string>();
      any = any || !out.empty();
      return true;
    };
    bool ok = true;
    if (k == "max_bytes") {
      if (v.is_number_unsigned()) p.max_bytes = v.get<std::uint64_t>();
      else if (v.is_string() && parse_size(v.get<std::string>())) p.max_bytes = parse_size(v.get<std::string>());
      else ok = false;
      any = any || ok;
    } else if (k == "older_than_s") {
      ok = v.is_number() && v.get<double>() >= 0 && v.get<double>() < 1e11;
      if (ok) p.older_than_ms = static_cast<std::int64_t>(v.get<double>() * 1000);
      any = any || ok;
    } else if (k == "max_entries") {
      ok = v.is_number_unsigned();
      if (ok) p.max_entries = v.get<std::uint64_t>();
      any = any || ok;
    } else if (k == "order") {
      ok = v == "lru" || v == "value";
      if (ok) p.order = v == "value" ? storage::EvictOrder::value : storage::EvictOrder::lru;
    } else if (k == "target") ok = want_string(p.target);
    else if (k == "mode") ok = want_string(p.mode);
    else if (k == "label_prefix") ok = want_string(p.label_prefix);
    else if (k == "toolchain") ok = want_string(p.toolchain);
    else if (k == "dry_run") {
      ok = v.is_boolean();
      if (ok) p.dry_run = v.get<bool>();
    } else {
      return error_response(400, "bad_policy", "unknown policy field '" + k.substr(0, 64) + "'");
    }
    if (!ok) return error_response(400, "bad_policy", "policy field '" + k + "' has the wrong type");
  }
  if (!any) {
    return error_response(400, "bad_policy",
                          "the policy selects nothing: give max_bytes, max_entries, older_than_s, target, mode, "
                          "label_prefix or toolchain");
  }
  return p;
}

asio::awaitable<Response> evict(Services& s, Request& req, const NamespacePtr& ns) {
  auto parsed = parse_policy(req.body);
  if (auto* r = std::get_if<Response>(&parsed)) co_return std::move(*r);
  auto policy = std::get<storage::EvictPolicy>(parsed);
  policy.value_window_ms = ns->spec.value_window_ms;
  auto rep_job = [&ns, &policy] { return ns->store->evict(policy); };
  auto rep = co_await run_blocking(s.pool, rep_job);
  if (!rep) {
    if (rep.error().code == Errc::invalid_argument) co_return error_response(400, "bad_policy", rep.error().message);
    co_return storage_failure(s, "evict", rep.error());
  }
  if (!policy.dry_run) {
    for (const auto& k : rep->keys) s.hot.erase(scoped_key(ns->name(), k));
    s.metrics.evicted_entries.fetch_add(rep->keys.size(), std::memory_order_relaxed);
    s.metrics.evicted_bytes.fetch_add(rep->bytes, std::memory_order_relaxed);
  }
  co_return json_response(200, {{"evicted", rep->keys.size()}, {"bytes", rep->bytes},
                                {"dry_run", policy.dry_run}, {"keys", rep->keys}});
}

asio::awaitable<Response> verify(Services& s, Request& req, const NamespacePtr& ns) {
  bool remove = false;
  for (const auto& [k, v] : req.query) {
    if (k != "remove") co_return error_response(400, "bad_query", "unknown query parameter '" + k.substr(0, 64) + "'");
    if (v != "true" && v != "false" && v != "1" && v != "0") {
      co_return error_response(400, "bad_query", "remove is true or false");
    }
    remove = v == "true" || v == "1";
  }
  auto rep_job = [&ns, &remove] { return ns->store->verify(bundle_matches_key, remove); };
  auto rep = co_await run_blocking(s.pool, rep_job);
  if (!rep) co_return storage_failure(s, "verify", rep.error());
  s.metrics.verify_corrupt.fetch_add(rep->corrupt.size(), std::memory_order_relaxed);
  for (const auto& k : rep->corrupt) s.hot.erase(scoped_key(ns->name(), k));
  co_return json_response(200, {{"checked", rep->checked}, {"corrupt", rep->corrupt}, {"removed", rep->removed}});
}

asio::awaitable<Response> pin(Services& s, Request& req, const NamespacePtr& ns, const std::string& key) {
  const bool on = req.method == "PUT";
  auto st_job = [&ns, &key, on] { return ns->store->set_pinned(key, on); };
  auto st = co_await run_blocking(s.pool, st_job);
  if (!st) {
    if (st.error().code == Errc::not_found) co_return error_response(404, "not_found", "no entry " + key);
    co_return storage_failure(s, "set_pinned", st.error());
  }
  co_return json_response(200, {{"key", key}, {"namespace", ns->name()}, {"pinned", on}});
}


}  // namespace

asio::awaitable<Response> handle_upkeep(Services& s, Request& req, const RouteMatch& m, const NamespacePtr& ns) {
  if (m.id == RouteId::entry_pin) co_return co_await pin(s, req, ns, m.key);
  if (m.id == RouteId::evict) co_return co_await evict(s, req, ns);
  co_return co_await verify(s, req, ns);
}

}  // namespace kcache::server
