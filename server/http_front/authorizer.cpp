#include "server/http_front/authorizer.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <mutex>
#include <sstream>

#include "common/sha256.hpp"
#include "server/http_front/http_types.hpp"
#include "server/http_front/namespace_file.hpp"

namespace kcache::server {

const char* role_name(Role r) noexcept {
  switch (r) {
    case Role::none: return "none";
    case Role::read: return "read";
    case Role::write: return "write";
    case Role::admin: return "admin";
  }
  return "unknown";
}

std::optional<Role> parse_role(std::string_view s) noexcept {
  if (s == "read") return Role::read;
  if (s == "write") return Role::write;
  if (s == "admin") return Role::admin;
  return std::nullopt;
}

namespace {

constexpr const char* k_realm = "Bearer realm=\"kcache\"";

bool token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The token of an Authorization header's value `Bearer <token>` (the scheme
// in any case; whitespace around the value and after the scheme ignored).
std::optional<std::string_view> bearer_token(std::string_view h) {
  h = trim(h);
  constexpr std::string_view k_scheme = "bearer ";
  bool bearer = h.size() > k_scheme.size();
  for (std::size_t i = 0; bearer && i < k_scheme.size(); ++i) {
    bearer = static_cast<char>(std::tolower(static_cast<unsigned char>(h[i]))) == k_scheme[i];
  }
  if (!bearer) return std::nullopt;
  std::string_view token = h.substr(k_scheme.size());
  while (!token.empty() && is_space(token.front())) token.remove_prefix(1);
  return token;
}

// The token an access request presents, without the whitespace around it;
// nullopt when its credentials are malformed (or an empty token).
std::optional<std::string_view> presented_token(const AccessRequest& req) {
  if (req.malformed || !req.token) return std::nullopt;
  std::string_view token = trim(*req.token);
  if (token.empty()) return std::nullopt;
  return token;
}

// Whether the request presents any credentials (well-formed or not).
bool has_credentials(const AccessRequest& req) { return req.malformed || req.token.has_value(); }

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    std::size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// What an authorizer decides from: every token with its namespace and role,
// the namespaces that exist, and those readable without a token. Loaded
// from --tokens (all in "default") and --namespaces; replaced whole on reload.
struct AuthTable {
  std::vector<TokenEntry> tokens;
  std::vector<std::string> names;
  std::vector<std::string> anonymous;
};

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Result<AuthTable> load_table(const AuthSettings& s) {
  AuthTable t;
  t.names.push_back(k_default_namespace);
  if (s.anonymous_read) t.anonymous.push_back(k_default_namespace);
  if (!s.tokens_file.empty()) {
    std::ifstream in(s.tokens_file, std::ios::binary);
    if (!in) return make_error(Errc::io_error, "cannot read tokens file " + s.tokens_file);
    std::stringstream ss;
    ss << in.rdbuf();
    auto parsed = parse_tokens(ss.str());
    if (!parsed) return make_error(parsed.error().code, s.tokens_file + ": " + parsed.error().message);
    t.tokens = std::move(*parsed);
  }
  if (!s.namespaces_file.empty()) {
    auto specs = load_namespace_file(s.namespaces_file);
    if (!specs) return specs.error();
    for (auto& spec : *specs) {
      if (!contains(t.names, spec.name)) t.names.push_back(spec.name);
      if (spec.anonymous_read && !contains(t.anonymous, spec.name)) t.anonymous.push_back(spec.name);
      for (auto& e : spec.tokens) {
        for (const auto& o : t.tokens) {
          if (o.digest == e.digest && o.ns == e.ns) {
            return make_error(Errc::invalid_argument, "namespace '" + e.ns +
                                                          "': a token of the namespaces file is also in the tokens file");
          }
        }
        t.tokens.push_back(e);
      }
    }
  }
  return t;
}

AuthDecision refuse(int status, std::string message) { return {false, status, std::move(message), {}, {}}; }

AuthDecision allow(std::string ns) { return {true, 200, {}, {}, std::move(ns)}; }

// Holds the table and reloads it from the settings' files.
class TableHolder {
 public:
  TableHolder(AuthSettings settings, AuthTable table)
      : settings_(std::move(settings)), table_(std::make_shared<const AuthTable>(std::move(table))) {}

  Status reload() {
    auto loaded = load_table(settings_);
    if (!loaded) return loaded.error();
    auto fresh = std::make_shared<const AuthTable>(std::move(*loaded));
    std::lock_guard lock(mu_);
    table_ = std::move(fresh);
    return Ok{};
  }

  std::shared_ptr<const AuthTable> snapshot() const {
    std::lock_guard lock(mu_);
    return table_;
  }

 protected:
  const AuthSettings settings_;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const AuthTable> table_;  // GUARDED_BY(mu_)
};

class LoopbackAuthorizer final : public Authorizer, TableHolder {
 public:
  LoopbackAuthorizer(AuthSettings settings, AuthTable table) : TableHolder(std::move(settings), std::move(table)) {}

  using Authorizer::authorize;
  using Authorizer::namespaces_of;

  AuthDecision authorize(const AccessRequest& req, Role needed) const override {
    if (needed == Role::none) return {};
    if (!peer_allowed(req)) {
      return refuse(403, std::string("role '") + role_name(needed) +
                             "' is only granted to loopback clients when the server has no --tokens");
    }
    std::string ns = req.ns ? std::string(*req.ns) : k_default_namespace;
    if (!contains(snapshot()->names, ns)) return refuse(403, "no namespace '" + ns + "' on this server");
    return allow(std::move(ns));
  }

  Status reload() override { return TableHolder::reload(); }

  std::vector<std::string> namespaces_of(const AccessRequest& req, Role needed) const override {
    if (needed != Role::none && !peer_allowed(req)) return {};
    return snapshot()->names;
  }

 private:
  bool peer_allowed(const AccessRequest& req) const {
    // mTLS counts per request, for the connection that showed a
    // certificate: a RESP connection (plain TCP) never did.
    return req.peer_loopback || settings_.allow_remote || (settings_.client_certs_verified && req.client_cert_verified);
  }
};

class TokenAuthorizer final : public Authorizer, TableHolder {
 public:
  TokenAuthorizer(AuthSettings settings, AuthTable table) : TableHolder(std::move(settings), std::move(table)) {}

  using Authorizer::authorize;
  using Authorizer::namespaces_of;

  AuthDecision authorize(const AccessRequest& req, Role needed) const override {
    if (needed == Role::none) return {};
    auto table = snapshot();
    const auto& want = req.ns;
    if (!has_credentials(req)) {
      const std::string ns = want ? std::string(*want) : k_default_namespace;
      if (needed == Role::read && contains(table->anonymous, ns)) return allow(ns);
      return unauthorized("this request needs `Authorization: Bearer <token>` with the " +
                              std::string(role_name(needed)) + " role",
                          "");
    }
    auto token = presented_token(req);
    if (!token) return unauthorized("the Authorization header must be `Bearer <token>`", "invalid_request");
    auto held = matches(*table, *token);
    if (held.empty()) return unauthorized("unknown token", "invalid_token");
    const TokenEntry* e = nullptr;
    if (want) {
      for (const auto* h : held) {
        if (h->ns == *want) e = h;
      }
      if (!e) return refuse(403, "this token has no role in namespace '" + std::string(*want) + "'");
    } else if (held.size() == 1) {
      e = held.front();
    } else {
      for (const auto* h : held) {
        if (h->ns == k_default_namespace) e = h;
      }
      if (!e) {
        return refuse(400, "this token acts in several namespaces; name one with X-Kcache-Namespace "
                           "(KCACHE_NAMESPACE, the CLI's --namespace)");
      }
    }
    if (static_cast<int>(e->role) < static_cast<int>(needed)) {
      return refuse(403, std::string("this token has the ") + role_name(e->role) + " role in namespace '" + e->ns +
                             "'; the request needs " + role_name(needed));
    }
    return allow(e->ns);
  }

  Status reload() override { return TableHolder::reload(); }

  std::size_t token_count() const override { return snapshot()->tokens.size(); }

  std::vector<std::string> namespaces_of(const AccessRequest& req, Role needed) const override {
    auto table = snapshot();
    std::vector<std::string> out;
    if (!has_credentials(req)) {
      if (needed == Role::read) out = table->anonymous;
      return out;
    }
    auto token = presented_token(req);
    if (!token) return out;
    for (const auto* h : matches(*table, *token)) {
      if (static_cast<int>(h->role) >= static_cast<int>(needed)) out.push_back(h->ns);
    }
    return out;
  }

 private:
  static AuthDecision unauthorized(std::string message, const char* error) {
    std::string challenge = k_realm;
    if (*error) challenge += std::string(", error=\"") + error + "\"";
    return {false, 401, std::move(message), std::move(challenge), {}};
  }

  // Every entry holding this token. Compares against every entry, always:
  // the time does not depend on whether or where the token matches.
  static std::vector<const TokenEntry*> matches(const AuthTable& table, std::string_view token) {
    const Digest d = sha256(token);
    std::vector<const TokenEntry*> out;
    out.reserve(4);
    for (const auto& e : table.tokens) {
      const bool eq = CRYPTO_memcmp(d.data(), e.digest.data(), d.size()) == 0;
      if (eq) out.push_back(&e);
    }
    return out;
  }
};

}  // namespace

AccessRequest access_request(const Request& req) {
  AccessRequest a;
  if (const std::string* h = req.header("authorization")) {
    if (auto token = bearer_token(*h)) {
      a.token = *token;
    } else {
      a.malformed = true;
    }
  }
  if (const std::string* ns = req.header("x-kcache-namespace")) a.ns = *ns;
  a.peer_loopback = req.peer_loopback;
  a.client_cert_verified = req.client_cert_verified;
  return a;
}

AuthDecision Authorizer::authorize(const Request& req, Role needed) const {
  return authorize(access_request(req), needed);
}

std::vector<std::string> Authorizer::namespaces_of(const Request& req, Role needed) const {
  return namespaces_of(access_request(req), needed);
}

Result<std::vector<TokenEntry>> parse_tokens(std::string_view text) {
  std::vector<TokenEntry> out;
  std::size_t lineno = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    auto f = fields(line);
    if (f.empty() || f[0].front() == '#') continue;
    const std::string where = "line " + std::to_string(lineno) + ": ";
    if (f.size() != 2) return make_error(Errc::invalid_argument, where + "want `TOKEN ROLE`");
    std::string_view token = f[0];
    if (token.size() < 16 || token.size() > 512) {
      return make_error(Errc::invalid_argument, where + "a token has 16 to 512 characters");
    }
    for (char c : token) {
      if (!token_char(c)) return make_error(Errc::invalid_argument, where + "a token is made of [A-Za-z0-9-._~+/=]");
    }
    auto role = parse_role(f[1]);
    if (!role) return make_error(Errc::invalid_argument, where + "role must be read, write or admin");
    TokenEntry e{sha256(token), *role};
    for (const auto& o : out) {
      if (o.digest == e.digest) return make_error(Errc::invalid_argument, where + "duplicate token");
    }
    out.push_back(e);
  }
  if (out.empty()) return make_error(Errc::invalid_argument, "no tokens");
  return out;
}

Result<std::unique_ptr<Authorizer>> make_authorizer(const AuthSettings& s) {
  auto table = load_table(s);
  if (!table) return table.error();
  if (table->tokens.empty()) {
    if (!s.tokens_file.empty()) return make_error(Errc::invalid_argument, s.tokens_file + ": no tokens");
    return std::unique_ptr<Authorizer>(std::make_unique<LoopbackAuthorizer>(s, std::move(*table)));
  }
  return std::unique_ptr<Authorizer>(std::make_unique<TokenAuthorizer>(s, std::move(*table)));
}

}  // namespace kcache::server
