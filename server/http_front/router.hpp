// Route matching: request target → route, key and query, before anything
// else runs. Every path that names a key must carry exactly 64 lowercase hex
// characters there; anything else (traversal, encoding, other lengths or
// cases) is 400 here, so storage never sees it.
// Thread safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "server/http_front/authorizer.hpp"

namespace kcache::server {

enum class RouteId {
  healthz,
  readyz,
  metrics,
  stats,
  artifact,     // /v1/artifacts/{key}
  leases,       // /v1/leases
  lease,        // /v1/leases/{key}
  lease_renew,  // /v1/leases/{key}/renew
  entries,      // /v1/entries
  entry,        // /v1/entries/{key}
  entry_pin,    // /v1/entries/{key}/pin (PUT pins, DELETE unpins)
  evict,
  verify,
  cold_start,   // /v1/cold-start: a rank's report of its cold start without waiting
  ui,           // /ui: the web page (--ui)
  ui_overview,  // /v1/ui/overview: the page's data
};

struct RouteMatch {
  RouteId id;
  std::string key;   // routes with {key}
  const char* tmpl;  // "/v1/artifacts/{key}": the metrics label
  std::string ns = "default";  // the namespace the request acts in (set by preflight from the authorizer)
};

struct RouteError {
  int status;  // 400 or 404
  std::string code;
  std::string message;
};

// Matches an origin-form path (no query).
std::variant<RouteMatch, RouteError> match_route(std::string_view path);

// Comma-separated methods the route answers, for 405's Allow header.
const char* allowed_methods(RouteId id);
bool method_allowed(RouteId id, std::string_view method);
// The role a method on a route needs.
Role required_role(RouteId id, std::string_view method);
// Which uploads may be large: only PUT /v1/artifacts/{key}.
bool takes_large_body(RouteId id, std::string_view method);

// Splits "path?query" and percent-decodes the query ('+' is a space).
// nullopt on a malformed escape.
std::optional<std::map<std::string, std::string>> parse_query(std::string_view query);
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

bool is_key(std::string_view s);

}  // namespace kcache::server
