#include "server/http/authorizer.hpp"

#include <openssl/crypto.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "common/sha256.hpp"

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

class LoopbackAuthorizer final : public Authorizer {
 public:
  LoopbackAuthorizer(bool allow_remote, bool certs) : allow_remote_(allow_remote), certs_(certs) {}

  AuthDecision authorize(const Request& req, Role needed) const override {
    // mTLS counts per request, for the connection that showed a
    // certificate: a RESP connection (plain TCP) never did.
    if (needed == Role::none || req.peer_loopback || allow_remote_ || (certs_ && req.client_cert_verified)) return {};
    return {false, 403,
            std::string("role '") + role_name(needed) +
                "' is only granted to loopback clients when the server has no --tokens",
            {}};
  }

 private:
  bool allow_remote_;
  bool certs_;
};

class TokenAuthorizer final : public Authorizer {
 public:
  TokenAuthorizer(std::string path, bool anonymous_read, std::vector<TokenEntry> tokens)
      : path_(std::move(path)),
        anonymous_read_(anonymous_read),
        tokens_(std::make_shared<const std::vector<TokenEntry>>(std::move(tokens))) {}

  AuthDecision authorize(const Request& req, Role needed) const override {
    if (needed == Role::none) return {};
    const std::string* header = req.header("authorization");
    if (!header) {
      if (anonymous_read_ && needed == Role::read) return {};
      return unauthorized("this request needs `Authorization: Bearer <token>` with the " +
                              std::string(role_name(needed)) + " role",
                          "");
    }
    std::string_view h = *header;
    while (!h.empty() && is_space(h.front())) h.remove_prefix(1);
    while (!h.empty() && is_space(h.back())) h.remove_suffix(1);
    constexpr std::string_view k_scheme = "bearer ";
    bool bearer = h.size() > k_scheme.size();
    for (std::size_t i = 0; bearer && i < k_scheme.size(); ++i) {
      bearer = static_cast<char>(std::tolower(static_cast<unsigned char>(h[i]))) == k_scheme[i];
    }
    if (!bearer) return unauthorized("the Authorization header must be `Bearer <token>`", "invalid_request");
    std::string_view token = h.substr(k_scheme.size());
    while (!token.empty() && is_space(token.front())) token.remove_prefix(1);

    const Digest d = sha256(token);
    auto table = snapshot();
    // Compare against every entry, always: the time does not depend on
    // whether or where the token matches.
    int found = -1;
    for (std::size_t i = 0; i < table->size(); ++i) {
      const bool eq = CRYPTO_memcmp(d.data(), (*table)[i].digest.data(), d.size()) == 0;
      found = eq ? static_cast<int>(i) : found;
    }
    if (found < 0) return unauthorized("unknown token", "invalid_token");
    Role have = (*table)[static_cast<std::size_t>(found)].role;
    if (static_cast<int>(have) < static_cast<int>(needed)) {
      return {false, 403,
              std::string("this token has the ") + role_name(have) + " role; the request needs " +
                  role_name(needed),
              {}};
    }
    return {};
  }

  Status reload() override {
    auto loaded = load(path_);
    if (!loaded) return loaded.error();
    auto fresh = std::make_shared<const std::vector<TokenEntry>>(std::move(*loaded));
    std::lock_guard lock(mu_);
    tokens_ = std::move(fresh);
    return Ok{};
  }

  std::size_t token_count() const override { return snapshot()->size(); }

  static Result<std::vector<TokenEntry>> load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(Errc::io_error, "cannot read tokens file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto parsed = parse_tokens(ss.str());
    if (!parsed) return make_error(parsed.error().code, path + ": " + parsed.error().message);
    return parsed;
  }

 private:
  static AuthDecision unauthorized(std::string message, const char* error) {
    std::string challenge = k_realm;
    if (*error) challenge += std::string(", error=\"") + error + "\"";
    return {false, 401, std::move(message), std::move(challenge)};
  }

  std::shared_ptr<const std::vector<TokenEntry>> snapshot() const {
    std::lock_guard lock(mu_);
    return tokens_;
  }

  const std::string path_;
  const bool anonymous_read_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<TokenEntry>> tokens_;  // GUARDED_BY(mu_)
};

}  // namespace

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
  if (s.tokens_file.empty()) {
    return std::unique_ptr<Authorizer>(std::make_unique<LoopbackAuthorizer>(s.allow_remote, s.client_certs_verified));
  }
  auto tokens = TokenAuthorizer::load(s.tokens_file);
  if (!tokens) return tokens.error();
  return std::unique_ptr<Authorizer>(
      std::make_unique<TokenAuthorizer>(s.tokens_file, s.anonymous_read, std::move(*tokens)));
}

}  // namespace kcache::server
