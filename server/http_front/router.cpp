#include "server/http_front/router.hpp"

namespace kcache::server {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

RouteError bad_key(std::string_view seg) {
  std::string shown(seg.substr(0, 80));
  return {400, "invalid_key", "a key is exactly 64 lowercase hex characters; got '" + shown + "'" +
                                  (seg.size() > 80 ? "…" : "") + " (" + std::to_string(seg.size()) + " characters)"};
}

// Rejects what no route ever needs: escapes, empty or dot segments,
// backslashes and control bytes. Traversal attempts end here.
std::optional<RouteError> check_path(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return RouteError{400, "bad_path", "the request target must be an absolute path"};
  }
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e || c == '%' || c == '\\') {
      return RouteError{400, "bad_path", "the path contains an escape, a backslash or a byte outside printable ASCII"};
    }
  }
  std::size_t i = 1;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view seg = path.substr(i, j - i);
    if (seg == "." || seg == "..") return RouteError{400, "bad_path", "dot segments are not allowed in paths"};
    if (seg.empty() && j != path.size()) return RouteError{400, "bad_path", "empty path segment"};
    i = j + 1;
  }
  return std::nullopt;
}

}  // namespace

bool is_key(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::variant<RouteMatch, RouteError> match_route(std::string_view path) {
  if (auto err = check_path(path)) return *err;
  static const struct {
    std::string_view path;
    RouteId id;
    const char* tmpl;
  } fixed[] = {
      {"/healthz", RouteId::healthz, "/healthz"},   {"/readyz", RouteId::readyz, "/readyz"},
      {"/metrics", RouteId::metrics, "/metrics"},   {"/v1/stats", RouteId::stats, "/v1/stats"},
      {"/v1/leases", RouteId::leases, "/v1/leases"}, {"/v1/entries", RouteId::entries, "/v1/entries"},
      {"/v1/evict", RouteId::evict, "/v1/evict"},   {"/v1/verify", RouteId::verify, "/v1/verify"},
      {"/v1/cold-start", RouteId::cold_start, "/v1/cold-start"},
      {"/ui", RouteId::ui, "/ui"},                  {"/v1/ui/overview", RouteId::ui_overview, "/v1/ui/overview"},
  };
  for (const auto& f : fixed) {
    if (path == f.path) return RouteMatch{f.id, {}, f.tmpl};
  }
  auto rest_after = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (path.size() >= prefix.size() && path.substr(0, prefix.size()) == prefix) return path.substr(prefix.size());
    return std::nullopt;
  };
  if (auto rest = rest_after("/v1/artifacts/")) {
    if (!is_key(*rest)) return bad_key(*rest);
    return RouteMatch{RouteId::artifact, std::string(*rest), "/v1/artifacts/{key}"};
  }
  if (auto rest = rest_after("/v1/entries/")) {
    auto slash = rest->find('/');
    std::string_view key = rest->substr(0, slash);
    if (!is_key(key)) return bad_key(key);
    if (slash == std::string_view::npos) return RouteMatch{RouteId::entry, std::string(key), "/v1/entries/{key}"};
    if (rest->substr(slash) == "/pin") return RouteMatch{RouteId::entry_pin, std::string(key), "/v1/entries/{key}/pin"};
  }
  if (auto rest = rest_after("/v1/leases/")) {
    auto slash = rest->find('/');
    std::string_view key = rest->substr(0, slash);
    if (!is_key(key)) return bad_key(key);
    if (slash == std::string_view::npos) return RouteMatch{RouteId::lease, std::string(key), "/v1/leases/{key}"};
    if (rest->substr(slash) == "/renew") {
      return RouteMatch{RouteId::lease_renew, std::string(key), "/v1/leases/{key}/renew"};
    }
  }
  return RouteError{404, "not_found", "no such route: " + std::string(path.substr(0, 200))};
}

const char* allowed_methods(RouteId id) {
  switch (id) {
    case RouteId::healthz:
    case RouteId::readyz:
    case RouteId::metrics:
    case RouteId::stats:
    case RouteId::ui:
    case RouteId::ui_overview:
    case RouteId::leases:
    case RouteId::entries:
    case RouteId::entry: return "GET, HEAD";
    case RouteId::artifact: return "GET, HEAD, PUT, DELETE";
    case RouteId::entry_pin: return "PUT, DELETE";
    case RouteId::lease: return "POST, DELETE";
    case RouteId::lease_renew:
    case RouteId::evict:
    case RouteId::verify:
    case RouteId::cold_start: return "POST";
  }
  return "";
}

bool method_allowed(RouteId id, std::string_view method) {
  std::string_view allowed = allowed_methods(id);
  std::size_t i = 0;
  while (i < allowed.size()) {
    std::size_t j = allowed.find(", ", i);
    if (j == std::string_view::npos) j = allowed.size();
    if (allowed.substr(i, j - i) == method) return true;
    i = j + 2;
  }
  return false;
}

Role required_role(RouteId id, std::string_view method) {
  switch (id) {
    case RouteId::artifact:
      if (method == "PUT") return Role::write;
      if (method == "DELETE") return Role::admin;
      return Role::read;
    case RouteId::lease:
    case RouteId::lease_renew:
    case RouteId::cold_start: return Role::write;  // what a job that compiles sends
    case RouteId::leases:
    case RouteId::entry_pin:
    case RouteId::evict:
    case RouteId::verify: return Role::admin;
    // Probes and the scrape stay open: see docs/security.md ("/metrics").
    case RouteId::healthz:
    case RouteId::readyz:
    case RouteId::metrics:
    case RouteId::ui: return Role::none;  // the page holds no data (docs/ui.md)
    default: return Role::read;
  }
}

bool takes_large_body(RouteId id, std::string_view method) { return id == RouteId::artifact && method == "PUT"; }

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::map<std::string, std::string>> parse_query(std::string_view query) {
  std::map<std::string, std::string> out;
  std::size_t i = 0;
  while (i < query.size()) {
    std::size_t j = query.find('&', i);
    if (j == std::string_view::npos) j = query.size();
    std::string_view part = query.substr(i, j - i);
    if (!part.empty()) {
      auto eq = part.find('=');
      auto k = percent_decode(part.substr(0, eq), true);
      auto v = eq == std::string_view::npos ? std::optional<std::string>("") : percent_decode(part.substr(eq + 1), true);
      if (!k || !v) return std::nullopt;
      out[*k] = *v;
    }
    i = j + 1;
  }
  return out;
}

}  // namespace kcache::server
