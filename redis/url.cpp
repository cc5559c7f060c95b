// parse_url(): see redis/url.hpp.
#include <charconv>
#include <cstdlib>
#include <fstream>

#include "redis/url.hpp"

namespace kcache::redis {
namespace {

Error bad(const std::string& why) { return make_error(Errc::invalid_argument, "redis URL: " + why); }

bool parse_int(std::string_view s, long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size() && !s.empty();
}

// %XX-decoding, so passwords may hold ':' '@' '/'.
std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::strtol(std::string(s.substr(i + 1, 2)).c_str(), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

Result<Url> parse_url(const std::string& url) {
  constexpr std::string_view k_scheme = "redis://";
  if (url.rfind(k_scheme, 0) != 0) return bad("must start with redis://");
  Url u;
  ConnectOptions& o = u.conn;
  std::string_view rest = std::string_view(url).substr(k_scheme.size());
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = cred.find(':');
    if (colon == std::string_view::npos) return bad("credentials must be user:password or :password");
    o.user = percent_decode(cred.substr(0, colon));
    o.password = percent_decode(cred.substr(colon + 1));
  }
  std::string_view hostport = rest;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    long db = 0;
    std::string_view dbs = rest.substr(slash + 1);
    if (!dbs.empty() && (!parse_int(dbs, db) || db < 0)) return bad("database must be a number");
    o.db = static_cast<int>(db);
  }
  if (auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
    long port = 0;
    if (!parse_int(hostport.substr(colon + 1), port) || port <= 0 || port > 65535) return bad("bad port");
    o.port = static_cast<int>(port);
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) return bad("missing host");
  o.host = std::string(hostport);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    auto eq = kv.find('=');
    long v = 0;
    auto name = eq == std::string_view::npos ? kv : kv.substr(0, eq);
    if (eq == std::string_view::npos || !parse_int(kv.substr(eq + 1), v) || v < 0) return bad("bad query parameter");
    const bool own = name == "connect_timeout_ms" || name == "timeout_ms" || name == "pool";
    if (own && v < 1) return bad("bad query parameter");
    if (name == "connect_timeout_ms") o.connect_timeout = std::chrono::milliseconds(v);
    else if (name == "timeout_ms") o.op_timeout = std::chrono::milliseconds(v);
    else if (name == "pool") o.pool_size = static_cast<std::size_t>(v);
    else u.extra.emplace_back(std::string(name), v);
  }
  if (o.password.empty()) {
    if (const char* file = std::getenv("KCACHE_REDIS_PASSWORD_FILE"); file != nullptr && *file) {
      std::ifstream in(file);
      if (!in) return bad(std::string("cannot read KCACHE_REDIS_PASSWORD_FILE ") + file);
      std::getline(in, o.password);
      if (!o.password.empty() && o.password.back() == '\r') o.password.pop_back();
    }
  }
  return u;
}

}  // namespace kcache::redis
