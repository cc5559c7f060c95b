// Authorizer: who may do what. Every route names the role it needs
// (read ⊂ write ⊂ admin, docs/protocol.md "Roles", docs/security.md); the
// session asks the authorizer before the handler runs (and before any body
// byte is read). RESP asks it too, for its commands
// (server/resp/resp_command_support.cpp).
//
// Both ask with an AccessRequest: the credentials presented, the namespace
// asked for, and what is known of the peer. HTTP builds one from a request
// (access_request(), or authorize(const Request&, …)); RESP from its
// connection's AUTH.
//
// Two implementations, chosen by make_authorizer():
//  - loopback (no --tokens): every role to loopback peers; to every peer
//    only with --insecure-allow-remote, or with mTLS (--tls-client-ca), where
//    the TLS handshake has already refused clients without a certificate
//    from the client CA.
//  - tokens (--tokens FILE): `Authorization: Bearer <token>`; the token's
//    role from the file. No token or an unknown one is 401 with
//    WWW-Authenticate; a known token whose role is too small is 403. With
//    --anonymous-read, a request that carries no Authorization header gets
//    the read role (a wrong token is still 401). Loopback peers get no
//    privilege.
// Namespaces (docs/namespaces.md): a token holds a role per namespace. A
// request names its namespace in `X-Kcache-Namespace` (RESP: the AUTH user
// name); without one it acts in the token's only namespace, else in
// "default". A token with no role in the named namespace, and a namespace
// that does not exist, are the same 403 (names do not leak).
// Token comparison: the presented token is hashed (SHA-256) and compared
// with CRYPTO_memcmp against the digest of *every* configured token, with
// no early exit, so neither the match nor its position leaks through time.
// The table keeps digests only; tokens never reach a log or an error message.
// Routes needing no role (/healthz, /readyz, /metrics: Role::none) are
// answered without looking at credentials.
// Thread safety: authorize() may be called concurrently with itself and
// with reload(); reload() swaps the table atomically (requests in flight
// finish with the old one).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace kcache::server {

struct Request;  // server/http_front/http_types.hpp

enum class Role { none, read, write, admin };

const char* role_name(Role r) noexcept;
// "read" / "write" / "admin" → Role; nullopt otherwise.
std::optional<Role> parse_role(std::string_view s) noexcept;

struct AuthDecision {
  bool allowed = true;
  int status = 200;       // 401 (who are you?), 403 (not allowed), 400 (which namespace?) when refused
  std::string message;
  std::string www_authenticate;  // set on 401
  // The namespace the request acts in (docs/namespaces.md): the one it
  // asked for (X-Kcache-Namespace, or RESP's AUTH user name), or the
  // token's only one, or "default". Set when allowed.
  std::string ns = "default";
};

// What an access decision reads, whichever protocol asks. A view: the
// strings it names must outlive it.
struct AccessRequest {
  // The credentials presented. `token`: a bearer token (HTTP: the value of
  // `Authorization: Bearer <token>`; RESP: AUTH's password), compared
  // without the whitespace around it; an empty one is malformed.
  // `malformed`: credentials that are not a bearer token (HTTP: an
  // Authorization header of another form). Neither: no credentials.
  std::optional<std::string_view> token;
  bool malformed = false;
  // The namespace asked for (HTTP: X-Kcache-Namespace; RESP: AUTH's user
  // name other than "default"). None: the token's only one, else "default".
  std::optional<std::string_view> ns;
  bool peer_loopback = false;
  // An HTTPS client that presented a certificate signed by --tls-client-ca
  // (never on RESP, which has no TLS).
  bool client_cert_verified = false;
};

// HTTP's access request: the Authorization and X-Kcache-Namespace headers
// (the scheme `Bearer` in any case, whitespace around the value and after
// the scheme ignored), the peer, the client certificate. Views into `req`.
AccessRequest access_request(const Request& req);

class Authorizer {
 public:
  virtual ~Authorizer() = default;
  virtual AuthDecision authorize(const AccessRequest& req, Role needed) const = 0;
  // HTTP: authorize(access_request(req), needed).
  AuthDecision authorize(const Request& req, Role needed) const;
  // Re-reads the credentials (SIGHUP). On failure the old ones stay in force.
  virtual Status reload() { return Ok{}; }
  // How many tokens are configured (0 for the loopback authorizer).
  virtual std::size_t token_count() const { return 0; }
  // The namespaces in which these credentials hold at least `needed`
  // (every namespace for the loopback authorizer's allowed peers).
  virtual std::vector<std::string> namespaces_of(const AccessRequest& req, Role needed) const = 0;
  // HTTP: namespaces_of(access_request(req), needed).
  std::vector<std::string> namespaces_of(const Request& req, Role needed) const;
};

struct TokenEntry {
  std::array<std::uint8_t, 32> digest;  // SHA-256 of the token
  Role role;
  std::string ns = "default";  // the namespace the role is held in
};

// Parses a tokens file: one `TOKEN ROLE` per line, blank lines and `#`
// comments ignored. A token is 16–512 characters of [A-Za-z0-9-._~+/=]
// (RFC 6750's b64token); a role is read, write or admin. Duplicate tokens
// and an empty file are errors. Error messages name the line, never the token.
Result<std::vector<TokenEntry>> parse_tokens(std::string_view text);

struct AuthSettings {
  std::string tokens_file;        // empty: no tokens (loopback authorizer)
  bool anonymous_read = false;    // tokens mode: no header → read
  bool allow_remote = false;      // loopback mode: --insecure-allow-remote
  bool client_certs_verified = false;  // loopback mode: mTLS is on
  // --namespaces FILE (server/http_front/namespace_file.hpp): namespaces and
  // their tokens, beside --tokens' (which act in "default"); with no token
  // in either, the loopback rules hold in every namespace.
  std::string namespaces_file;
};

// Loads the tokens file when one is named; invalid_argument / io_error when
// it cannot be read or parsed.
Result<std::unique_ptr<Authorizer>> make_authorizer(const AuthSettings& settings);

}  // namespace kcache::server
