// Api: kcache-server's HTTP API as the CLI uses it (docs/protocol.md).
//
// Turns answers into values and errors into messages that say what to do:
// 404 → Errc::not_found; 401/403 name the role the command needs and how to
// pass a token; 5xx name the server and the failing part. The server's
// version is taken from its `Server` header.
// Thread safety: one Api per thread.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "cli/http_transport.hpp"

namespace kcache::cli {

// Roles as the server grants them (read ⊂ write ⊂ admin).
enum class Role { read, write, admin };
const char* role_name(Role r) noexcept;

class Api {
 public:
  // Errc::invalid_argument for a malformed --server URL.
  static Result<Api> connect(const Context& ctx);

  // One request; any status ≥ 400 becomes an Error (see above). `what`
  // describes the object for a 404 message ("entry 9f86…").
  Result<HttpReply> call(const std::string& method, const std::string& target, Role role,
                         const std::string& what = "", const std::string& body = "",
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // call() whose 2xx body must be JSON.
  Result<nlohmann::json> call_json(
      const std::string& method, const std::string& target, Role role, const std::string& what = "",
      const std::string& body = "",
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // The unchanged answer, errors included (for /readyz, whose 503 is data).
  Result<HttpReply> raw(const std::string& method, const std::string& target);

  const std::string& url() const { return transport_.endpoint().url; }
  // "kcache/0.1" from the last answer's Server header, or "".
  const std::string& server_version() const { return server_version_; }

 private:
  Api(HttpTransport transport, const Context& ctx) : transport_(std::move(transport)), ctx_(&ctx) {}

  HttpTransport transport_;
  const Context* ctx_;
  std::string server_version_;
};

// Percent-encodes a query value (RFC 3986 unreserved characters kept).
std::string url_encode(const std::string& value);

}  // namespace kcache::cli
