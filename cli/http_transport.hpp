// HttpTransport: one synchronous HTTP/1.1 (or HTTPS) exchange with
// kcache-server.
//
// The only file that knows about sockets and TLS (Boost.Beast and OpenSSL
// stay in the .cpp). HTTPS verifies the server's certificate against
// --cacert (else the system store) and its name against the URL's host; a
// client certificate (--cert/--key) answers a server that requires mTLS. Every step (resolve, connect, write,
// read) runs under one deadline (name resolution under the system's own); a failure is a value that
// names the URL and says what to do. `Authorization: Bearer <token>` is sent when a token is set;
// the token is never printed. Thread safety: one transport per thread.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "common/tls_files.hpp"

namespace kcache::cli {

struct Endpoint {
  std::string scheme;     // "http" or "https"
  std::string host;       // without brackets for IPv6
  std::string port;       // "8420"
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  std::string url;        // as given, for messages
};

// "http[s]://host[:port][/base]"; a bare "host:port" means http.
// Errc::invalid_argument for anything else.
Result<Endpoint> parse_url(const std::string& url);

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // "/v1/stats?x=y", appended to base_path
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{30000};
};

struct HttpReply {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  std::string header(const std::string& lower_name) const;
};

// PEM files, as the client library takes them (common/tls_files.hpp;
// --cacert, --cert, --key or KCACHE_CA_FILE, KCACHE_CLIENT_CERT,
// KCACHE_CLIENT_KEY); ca_file empty: the system store.
using kcache::TlsFiles;

class HttpTransport {
 public:
  HttpTransport(Endpoint endpoint, std::string token, TlsFiles tls = {});

  // Errc::unavailable (cannot resolve/connect/exchange), Errc::timeout.
  Result<HttpReply> send(const HttpRequest& req) const;

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  Endpoint endpoint_;
  std::string token_;
  TlsFiles tls_;
};

}  // namespace kcache::cli
