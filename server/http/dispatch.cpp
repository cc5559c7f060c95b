// preflight(), handle_request() and storage_failure(): the part of request
// handling every route shares.
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "server/http/handlers.hpp"
#include "server/services.hpp"

namespace kcache::server {

Response storage_failure(Services& s, const char* op, const Error& e) {
  s.metrics.storage_error(op);
  spdlog::warn("storage {} failed: {}: {}", op, errc_name(e.code), e.message);
  switch (e.code) {
    case Errc::full: return error_response(507, "storage_full", e.message);
    case Errc::unavailable:
    case Errc::timeout: {
      auto r = error_response(503, "storage_unavailable", e.message);
      r.set("Retry-After", "1");
      return r;
    }
    case Errc::not_durable: {
      // Written on a master, not confirmed on its replicas: not claimed
      // stored. A retried upload is idempotent (the same key, bytes checked).
      auto r = error_response(503, "storage_not_durable", e.message);
      r.set("Retry-After", "1");
      return r;
    }
    case Errc::invalid_argument: return error_response(400, "invalid_argument", e.message);
    default: return error_response(500, "storage_error", std::string(errc_name(e.code)) + ": " + e.message);
  }
}

Response namespace_gone(const std::string& ns) {
  return error_response(403, "forbidden", "no namespace '" + ns + "' on this server");
}

std::variant<RouteMatch, Response> preflight(Services& s, const Request& req) {
  auto matched = match_route(req.path);
  if (auto* err = std::get_if<RouteError>(&matched)) {
    auto r = error_response(err->status, err->code, err->message);
    r.route = "unmatched";
    return r;
  }
  auto& m = std::get<RouteMatch>(matched);
  if (!method_allowed(m.id, req.method)) {
    auto r = error_response(405, "method_not_allowed", req.method + " is not allowed on " + m.tmpl);
    r.set("Allow", allowed_methods(m.id));
    r.route = m.tmpl;
    r.key = m.key;
    return r;
  }
  auto decision = s.authorizer.authorize(req, required_role(m.id, req.method));
  if (!decision.allowed) {
    const char* code = decision.status == 401 ? "unauthorized" : decision.status == 400 ? "namespace_required" : "forbidden";
    auto r = error_response(decision.status, code, decision.message);
    if (!decision.www_authenticate.empty()) r.set("WWW-Authenticate", decision.www_authenticate);
    r.route = m.tmpl;
    r.key = m.key;
    return r;
  }
  m.ns = std::move(decision.ns);
  return m;
}

boost::asio::awaitable<Response> handle_request(Services& s, Request& req, const RouteMatch& m) {
  Response r;
  switch (m.id) {
    case RouteId::artifact: r = co_await handle_artifact(s, req, m); break;
    case RouteId::lease:
    case RouteId::lease_renew:
    case RouteId::leases: r = co_await handle_lease(s, req, m); break;
    default: r = co_await handle_admin(s, req, m); break;
  }
  r.route = m.tmpl;
  r.key = m.key;
  co_return r;
}

}  // namespace kcache::server
