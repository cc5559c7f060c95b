// HttpClient: HTTP/1.1 over TCP or TLS to one server, with a pool of
// keep-alive connections and a deadline on every step.
//
// Contract:
//  - send() makes one attempt (retries are the caller's policy) and returns
//    the response or an Error: unavailable (cannot connect, connection
//    dropped, TLS failure), timeout (a deadline passed), too_large (a body
//    over the limit). Any HTTP status is a response, not an Error.
//  - Deadlines: connect + TLS handshake ≤ connect_ms; writing the request
//    ≤ request_ms + body/min_rate; response headers ≤ request_ms +
//    extra_ms (a long poll passes its wait); the response body ≤ request_ms +
//    size/min_rate more.
//  - A pooled connection is reused only by the process that opened it: when
//    getpid() changes (fork), the pool is abandoned without any I/O on the
//    parent's sockets (the file descriptors are closed; TLS state is freed,
//    no close_notify is sent).
//  - Uses Boost.Beast for HTTP framing over its own socket stream (poll(2)
//    deadlines, TLS through OpenSSL memory BIOs so no SIGPIPE is raised).
// Thread safety: send() may be called from many threads at once; each
// request uses its own connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/http_url.hpp"
#include "common/result.hpp"
#include "common/tls_files.hpp"

namespace kcache::client {

// http[s]://host[:port][/prefix] (common/http_url.hpp).
struct Url : HttpUrl {
  static Result<Url> parse(std::string_view text) {
    auto u = parse_http_url(text);
    if (!u) return u.error();
    return Url{*u};
  }
};

// ca_file empty: the system store (common/tls_files.hpp).
using kcache::TlsFiles;

struct Timeouts {
  int connect_ms = 2000;
  int request_ms = 5000;
  std::uint64_t min_rate = 1 << 20;     // bytes per second
  std::uint64_t max_body = 2ull << 30;  // largest response body
};

struct HttpRequest {
  std::string method;  // GET, HEAD, PUT, POST, DELETE
  std::string target;  // path and query, after the URL's prefix
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::uint8_t> body;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::vector<std::uint8_t> body;
  std::string header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  static Result<std::unique_ptr<HttpClient>> create(Url url, TlsFiles tls, Timeouts timeouts);
  ~HttpClient();

  Result<HttpResponse> send(const HttpRequest& request, int extra_ms = 0);

  // Closes idle connections (pool_size() == 0 afterwards).
  void drop_pool();
  std::size_t pool_size();
  // Connections opened since creation (tests: keep-alive reuse).
  std::uint64_t connections_opened() const;

  struct Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcache::client
