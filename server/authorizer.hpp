// Authorizer: who may do what. Every route names the role it needs
// (read ⊂ write ⊂ admin, DESIGN.md "Server"); the session asks the
// authorizer before the handler runs.
//
// This version has no tokens yet (they arrive with TLS): the loopback
// authorizer allows every role to loopback peers, and to everyone only when
// the operator passed --insecure-allow-remote. A token authorizer
// (Authorization: Bearer, constant-time comparison, 401 vs 403) implements
// the same interface later.
// Thread safety: authorize() may be called concurrently.
#pragma once

#include <memory>
#include <string>

#include "server/http_types.hpp"

namespace kcache::server {

enum class Role { read, write, admin };

const char* role_name(Role r) noexcept;

struct AuthDecision {
  bool allowed = true;
  int status = 200;       // 401 (who are you?) or 403 (not allowed) when refused
  std::string message;
};

class Authorizer {
 public:
  virtual ~Authorizer() = default;
  virtual AuthDecision authorize(const Request& req, Role needed) const = 0;
};

std::unique_ptr<Authorizer> make_loopback_authorizer(bool allow_remote);

}  // namespace kcache::server
