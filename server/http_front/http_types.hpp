// Request and Response: the server's own small HTTP message types.
//
// The session (server/http/http_session.cpp) converts Beast messages to and from
// these, so route handlers never include Beast (Beast translation units
// compile slowly) and can be unit-tested without sockets. Bodies move, never
// copy: an upload's bytes go from the parser to storage in one vector.
// Thread safety: plain value types.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "server/http_front/client_watch.hpp"

namespace kcache::server {

class UploadSpool;

struct Request {
  std::uint64_t id = 0;      // per-process request number, for the access log
  std::string method;        // "GET", "PUT", …
  std::string target;        // as received: path and query
  std::string path;          // target up to '?'
  std::map<std::string, std::string> query;  // percent-decoded
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::vector<std::uint8_t> body;
  // An upload larger than --upload-spool-threshold: its bytes are in this
  // file and `body` is empty (server/http/upload_spool.hpp).
  std::shared_ptr<UploadSpool> spool;
  std::string peer;          // "ip:port"
  bool peer_loopback = false;
  // An HTTPS client that presented a certificate signed by --tls-client-ca
  // (never set on RESP, which has no TLS).
  bool client_cert_verified = false;
  std::shared_ptr<ClientWatch> watch;  // null unless the request may wait (client_watch.hpp)

  // First header with this (lowercase) name, or nullptr.
  const std::string* header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers) {
      if (k == lower_name) return &v;
    }
    return nullptr;
  }
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Length
  std::vector<std::uint8_t> body;
  // When set, sent instead of `body` without copying it (hot-tier hits share
  // the cached bytes with every response in flight).
  std::shared_ptr<const std::vector<std::uint8_t>> shared_body;
  // HEAD: the Content-Length to announce for the GET this stands for; the
  // body stays empty.
  std::optional<std::uint64_t> head_length;
  // Close the connection after this response (e.g. the body was not read).
  bool close = false;
  // For the access log and metrics: the route template and the key, if any.
  std::string route;
  std::string key;

  void set(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

// 200-style JSON answer (Content-Type: application/json).
Response json_response(int status, const nlohmann::json& body);
// Error answer: {"error": code, "message": message}.
Response error_response(int status, std::string_view code, std::string_view message);
// text/plain answer.
Response text_response(int status, std::string_view text, std::string_view content_type = "text/plain; charset=utf-8");

// Standard reason phrase; "Unknown" for codes we never send.
const char* reason_phrase(int status);

}  // namespace kcache::server
