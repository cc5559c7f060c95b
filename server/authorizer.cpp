#include "server/authorizer.hpp"

namespace kcache::server {

const char* role_name(Role r) noexcept {
  switch (r) {
    case Role::read: return "read";
    case Role::write: return "write";
    case Role::admin: return "admin";
  }
  return "unknown";
}

namespace {

class LoopbackAuthorizer final : public Authorizer {
 public:
  explicit LoopbackAuthorizer(bool allow_remote) : allow_remote_(allow_remote) {}

  AuthDecision authorize(const Request& req, Role needed) const override {
    if (req.peer_loopback || allow_remote_) return {};
    return {false, 403, std::string("role '") + role_name(needed) +
                            "' is only granted to loopback clients without authentication"};
  }

 private:
  bool allow_remote_;
};

}  // namespace

std::unique_ptr<Authorizer> make_loopback_authorizer(bool allow_remote) {
  return std::make_unique<LoopbackAuthorizer>(allow_remote);
}

}  // namespace kcache::server
