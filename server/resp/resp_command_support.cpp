#include "server/resp/resp_command_support.hpp"

#include "server/resp/resp_hot.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <spdlog/spdlog.h>

namespace kcache::server::resp {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::optional<long long> to_int(std::string_view s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

void wrong_args(std::string& out, std::string_view cmd) {
  error(out, "ERR wrong number of arguments for '" + std::string(cmd) + "' command");
}

void storage_error(Services& s, std::string& out, const char* op, const Error& e) {
  s.metrics.storage_error(op);
  spdlog::warn("RESP: storage {} failed: {}: {}", op, errc_name(e.code), e.message);
  if (e.code == Errc::full) {
    error(out, "OOM the cache's storage is full and nothing could be evicted: " + e.message);
  } else {
    error(out, std::string("ERR storage ") + errc_name(e.code) + ": " + e.message);
  }
}

namespace {

// What the authorizer decides from: AUTH's token, and its user name as the
// namespace asked for ("default" or none: the token's only namespace). A
// RESP connection is plain TCP: no client certificate.
AccessRequest access_request(const Conn& c) {
  AccessRequest a;
  if (c.token) a.token = *c.token;
  if (c.user && *c.user != k_default_namespace) a.ns = *c.user;
  a.peer_loopback = c.loopback;
  return a;
}

}  // namespace

bool credentials_read(const RespShared& sh, const Conn& c) {
  // 400: a known token held in several namespaces, none named yet (its
  // commands are then refused until an AUTH names one).
  const auto d = sh.s.authorizer.authorize(access_request(c), Role::read);
  return d.allowed || d.status == 400;
}

std::string namespace_of(const RespShared& sh, const Conn& c) {
  auto d = sh.s.authorizer.authorize(access_request(c), Role::read);
  return d.allowed ? d.ns : std::string(k_default_namespace);
}

namespace {

// A connection acts in one namespace (its credentials', namespace_of());
// the session runs its commands on that namespace's RespShared, so a
// decision made here in another namespace than `sh`'s is refused.
AuthDecision decide(const RespShared& sh, const Conn& c, Role needed) {
  auto d = sh.s.authorizer.authorize(access_request(c), needed);
  if (d.allowed && needed != Role::none && d.ns != sh.ns) {
    return {false, 403, "this connection acts in namespace '" + d.ns + "', not '" + sh.ns + "'", {}, {}};
  }
  return d;
}

}  // namespace

bool allowed(RespShared& sh, const Conn& c, Role needed, std::string_view cmd, std::string& out) {
  const auto d = decide(sh, c, needed);
  if (d.allowed) return true;
  if (d.status == 401) {
    error(out, "NOAUTH Authentication required.");
  } else if (d.status == 400) {
    error(out, "NOPERM this token acts in several namespaces: name one with AUTH <namespace> <token>");
  } else {
    error(out, "NOPERM this connection's token has no permission to run the '" + std::string(cmd) + "' command");
  }
  return false;
}

bool may(const RespShared& sh, const Conn& c, Role needed) { return decide(sh, c, needed).allowed; }

bool flight_eligible(const RespShared& sh, std::string_view key) {
  if (sh.s.config.resp_flight_window_ms == 0) return false;
  return std::any_of(sh.s.config.resp_flight_prefixes.begin(), sh.s.config.resp_flight_prefixes.end(),
                     [&](const std::string& p) { return key.substr(0, p.size()) == p; });
}

Result<std::vector<std::uint8_t>> lookup(RespShared& sh, const std::string& skey) {
  const auto since = sh.s.hot.generation();
  if (sh.expiries.expired(skey)) {
    (void)sh.s.backend.remove(skey);
    sh.expiries.clear(skey);
    return Error{Errc::not_found, "expired"};
  }
  auto got = sh.s.backend.get(skey);
  if (got && !unwrap_value(*got)) return Error{Errc::corrupt, "a stored RESP value without its envelope"};
  if (got) remember(sh, skey, *got, since);
  return got;
}

}  // namespace kcache::server::resp
