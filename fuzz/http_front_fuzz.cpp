// libFuzzer target for kcache-server's HTTP front door: what runs on a
// request's bytes before any handler or storage — Beast's request parser
// (under the server's header and body limits), then, as
// server/http/http_session.cpp and dispatch.cpp do: the target split into
// path and query (parse_query), match_route, method_allowed, required_role
// and the token authorizer (three tokens, one per role).
//
// The input is fed twice: whole, and in chunks whose sizes come from its
// first byte (as a socket delivers it); both must give the same outcome.
// Invariants: nothing crashes; a matched key route carries a 64-hex key; a
// matched path has no "..", no "//" and no '%'; a request is never allowed
// a role its token does not hold; an unauthenticated request is never
// allowed anything.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <unistd.h>

#include "server/http_front/authorizer.hpp"
#include "server/http_front/http_types.hpp"
#include "server/http_front/request_head.hpp"
#include "server/http_front/router.hpp"

namespace {

namespace http = boost::beast::http;
using namespace kcache::server;

constexpr std::size_t k_header_limit = 2048;
constexpr std::size_t k_body_limit = 4096;
const char* k_tokens[] = {"reader-token-0123456789", "writer-token-0123456789", "admin-token-0123456789"};

const Authorizer& authorizer() {
  static std::unique_ptr<Authorizer> a = [] {
    char path[] = "/tmp/kcache-fuzz-tokens-XXXXXX";
    int fd = ::mkstemp(path);
    if (fd < 0) std::abort();
    ::close(fd);
    {
      std::ofstream f(path);
      f << k_tokens[0] << " read\n" << k_tokens[1] << " write\n" << k_tokens[2] << " admin\n";
    }
    AuthSettings s;
    s.tokens_file = path;
    auto made = make_authorizer(s);
    ::unlink(path);
    if (!made) std::abort();
    return std::move(*made);
  }();
  return *a;
}

// The role a request's credentials hold, by the documented rule
// (docs/security.md): `Bearer <token>`, the scheme in any case, whitespace
// around the value and after the scheme ignored, the token exact.
Role token_role(const Request& req) {
  const std::string* auth = req.header("authorization");
  if (!auth) return Role::none;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  std::string_view h = *auth;
  while (!h.empty() && space(h.front())) h.remove_prefix(1);
  while (!h.empty() && space(h.back())) h.remove_suffix(1);
  if (h.size() < 7) return Role::none;
  std::string scheme(h.substr(0, 7));
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer ") return Role::none;
  h.remove_prefix(7);
  while (!h.empty() && space(h.front())) h.remove_prefix(1);
  for (int i = 0; i < 3; ++i) {
    if (h == k_tokens[i]) return static_cast<Role>(i + 1);
  }
  return Role::none;
}

// What the front door decided, as text (compared between the two feeds).
std::string front_door(const http::request<http::string_body>& h) {
  Request req;
  fill_request_head(h, req);  // the session's own conversion
  auto qpos = req.target.find('?');
  req.path = req.target.substr(0, qpos);
  auto query = parse_query(qpos == std::string::npos ? std::string_view{}
                                                     : std::string_view(req.target).substr(qpos + 1));
  if (!query) return "bad_query";
  req.query = std::move(*query);
  auto matched = match_route(req.path);
  if (auto* err = std::get_if<RouteError>(&matched)) return "route_error " + std::to_string(err->status);
  const auto& m = std::get<RouteMatch>(matched);
  if (!m.key.empty() && !is_key(m.key)) std::abort();  // a key route with a malformed key
  if (req.path.find("..") != std::string::npos || req.path.find("//") != std::string::npos ||
      req.path.find('%') != std::string::npos) {
    std::abort();  // traversal or an escape got through the router
  }
  if (!method_allowed(m.id, req.method)) return "405";
  const Role needed = required_role(m.id, req.method);
  auto decision = authorizer().authorize(req, needed);
  if (decision.allowed && needed != Role::none && token_role(req) < needed) std::abort();
  return std::string(m.tmpl) + " " + (decision.allowed ? "allowed" : std::to_string(decision.status));
}

std::string parse(std::string_view data, std::size_t chunk) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(k_header_limit);
  parser.body_limit(k_body_limit);
  parser.eager(true);
  boost::beast::error_code ec;
  std::string fed;  // bytes received and not yet taken by the parser
  std::size_t at = 0;
  for (;;) {
    if (!fed.empty()) {
      std::size_t used = parser.put(boost::asio::buffer(fed.data(), fed.size()), ec);
      fed.erase(0, used);
      if (ec == http::error::need_more) {
        ec = {};
      } else if (ec) {
        return "error " + ec.message();
      }
      if (parser.is_done()) break;
      if (used > 0 && !fed.empty()) continue;  // it may take more of what it has
    }
    if (at >= data.size()) return "incomplete";
    std::size_t n = std::min(chunk, data.size() - at);
    fed.append(data.substr(at, n));
    at += n;
  }
  return front_door(parser.get());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::size_t chunk = 1 + data[0] % 16;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string whole = parse(input, input.size() + 1);
  std::string chunked = parse(input, chunk);
  // A parse error may be reported at a different byte, never a different
  // decision on a request both feeds parsed.
  bool both_parsed = whole.rfind("error", 0) != 0 && chunked.rfind("error", 0) != 0 &&
                     whole != "incomplete" && chunked != "incomplete";
  if (both_parsed && whole != chunked) {
    std::fprintf(stderr, "whole: %s\nchunked: %s\n", whole.c_str(), chunked.c_str());
    std::abort();
  }
  return 0;
}
