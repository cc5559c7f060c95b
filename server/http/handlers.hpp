// The HTTP API's request handling (server/http/dispatch.cpp and the route
// files), called by the session (server/http/http_session.cpp) with the
// services every handler shares (server/services.hpp).
#pragma once

#include <variant>

#include <boost/asio/awaitable.hpp>

#include "common/result.hpp"
#include "server/http_front/http_types.hpp"
#include "server/http_front/router.hpp"
#include "server/services.hpp"

namespace kcache::server {

// Maps an unexpected storage failure to a response (507 full, 503
// unavailable/timeout, 400 invalid_argument, else 500), counting it.
Response storage_failure(Services& s, const char* op, const Error& e);

// A request allowed in a namespace that a reload removed meanwhile: 403.
Response namespace_gone(const std::string& ns);

// Before the body is read: the route, or the response that ends the request
// here (400 bad path or key, 404 no route, 405, 401/403).
std::variant<RouteMatch, Response> preflight(Services& s, const Request& req);

// After the body is read: the answer. REQUIRES: `m` from preflight(req).
boost::asio::awaitable<Response> handle_request(Services& s, Request& req, const RouteMatch& m);

// Per-route handlers (artifact_routes.cpp, lease_routes.cpp, admin_routes.cpp).
boost::asio::awaitable<Response> handle_artifact(Services& s, Request& req, const RouteMatch& m);
boost::asio::awaitable<Response> handle_lease(Services& s, Request& req, const RouteMatch& m);
boost::asio::awaitable<Response> handle_admin(Services& s, Request& req, const RouteMatch& m);
// evict, verify and pins (upkeep_routes.cpp), in namespace `ns`.
boost::asio::awaitable<Response> handle_upkeep(Services& s, Request& req, const RouteMatch& m, const NamespacePtr& ns);
// POST /v1/cold-start (cold_start_routes.cpp): counters a rank reports.
Response handle_cold_start(Services& s, const Request& req);
boost::asio::awaitable<Response> handle_ui(Services& s, Request& req, const RouteMatch& m);  // ui_routes.cpp

}  // namespace kcache::server
