#include "cli/api.hpp"

#include <fstream>
#include <utility>

namespace kcache::cli {

using nlohmann::json;

const char* role_name(Role r) noexcept {
  switch (r) {
    case Role::read: return "read";
    case Role::write: return "write";
    case Role::admin: return "admin";
  }
  return "unknown";
}

std::string url_encode(const std::string& value) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Result<Api> Api::connect(const Context& ctx) {
  auto ep = parse_url(ctx.server);
  if (!ep) return ep.error();
  // A TLS file that cannot be read is the caller's mistake, said before any
  // connection is tried (else it would read as an unreachable server).
  for (const auto& [option, path] : {std::pair{"--cacert", &ctx.ca_file},
                                     std::pair{"--cert", &ctx.cert_file},
                                     std::pair{"--key", &ctx.key_file}}) {
    if (!path->empty() && !std::ifstream(*path)) {
      return usage_error(std::string(option) + " " + *path + ": cannot read this file");
    }
  }
  return Api(HttpTransport(std::move(*ep), ctx.token, {ctx.ca_file, ctx.cert_file, ctx.key_file}), ctx);
}

Result<HttpReply> Api::raw(const std::string& method, const std::string& target) {
  HttpRequest req;
  req.method = method;
  req.target = target;
  req.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(ctx_->timeout_s * 1000));
  if (!ctx_->ns.empty()) req.headers.emplace_back("X-Kcache-Namespace", ctx_->ns);
  auto reply = transport_.send(req);
  if (reply && server_version_.empty()) server_version_ = reply->header("server");
  return reply;
}

Result<HttpReply> Api::call(const std::string& method, const std::string& target, Role role,
                            const std::string& what, const std::string& body,
                            std::chrono::milliseconds timeout) {
  HttpRequest req;
  req.method = method;
  req.target = target;
  req.body = body;
  if (!ctx_->ns.empty()) req.headers.emplace_back("X-Kcache-Namespace", ctx_->ns);
  if (!body.empty()) {
    bool binary = method == "PUT";
    req.headers.emplace_back("Content-Type",
                             binary ? "application/octet-stream" : "application/json");
  }
  req.timeout = timeout.count() > 0
                    ? timeout
                    : std::chrono::milliseconds(static_cast<std::int64_t>(ctx_->timeout_s * 1000));
  auto reply = transport_.send(req);
  if (!reply) return reply.error();
  if (auto v = reply->header("server"); !v.empty()) server_version_ = v;
  if (reply->status < 400) return reply;

  std::string code, message;
  auto j = json::parse(reply->body, nullptr, false);
  if (j.is_object()) {
    code = j.value("error", "");
    message = j.value("message", "");
  }
  const std::string said = message.empty() ? "" : " (server said: " + message + ")";
  const std::string cmd = "`kcache " + ctx_->command + "`";
  const std::string role_text = std::string("'") + role_name(role) + "'";
  switch (reply->status) {
    case 401:
      return make_error(Errc::bad_signature, "the server at " + url() + " wants a token for " +
                                                 cmd + ", which needs the " + role_text +
                                                 " role: pass --token TOKEN or set KCACHE_TOKEN" +
                                                 said);
    case 403:
      return make_error(Errc::bad_signature, "the server at " + url() + " refused " + cmd +
                                                 ": it needs the " + role_text +
                                                 " role; use a token that has it (--token or "
                                                 "KCACHE_TOKEN), or run kcache on the server host" +
                                                 said);
    case 404:
      if (code == "not_found" && !what.empty()) {
        return make_error(Errc::not_found,
                          "no " + what + " on " + url() + " (check the key with `kcache ls`)");
      }
      return make_error(Errc::not_found, method + " " + target + " is not known to the server at " +
                                             url() + " — is it a kcache-server of this version?" +
                                             said);
    case 507:
      return make_error(
          Errc::full, "the cache at " + url() +
                          " is full and cannot make room: evict (`kcache evict --max-bytes …`) or "
                          "raise the server's --max-bytes" +
                          said);
    case 503:
      if (code == "storage_unavailable") {
        return make_error(Errc::unavailable,
                          "kcache-server at " + url() +
                              " cannot reach its storage; check the server's log" + said);
      }
      return make_error(Errc::unavailable, "kcache-server at " + url() + " is unavailable (" +
                                               code + "); retry shortly" + said);
    default: break;
  }
  if (reply->status == 400 &&
      (code == "bad_query" || code == "bad_policy" || code == "invalid_key")) {
    return usage_error("the server refused the request: " + (message.empty() ? code : message));
  }
  return make_error(reply->status >= 500 ? Errc::internal : Errc::corrupt,
                    "kcache-server at " + url() + " answered " + std::to_string(reply->status) +
                        (code.empty() ? "" : " " + code) + " to " + method + " " + target + said);
}

Result<json> Api::call_json(const std::string& method, const std::string& target, Role role,
                            const std::string& what, const std::string& body,
                            std::chrono::milliseconds timeout) {
  auto reply = call(method, target, role, what, body, timeout);
  if (!reply) return reply.error();
  auto j = json::parse(reply->body, nullptr, false);
  if (j.is_discarded()) {
    return make_error(Errc::corrupt, "the answer of " + url() + " to " + method + " " + target +
                                         " is not JSON — is --server pointing at a kcache-server?");
  }
  return j;
}

}  // namespace kcache::cli
