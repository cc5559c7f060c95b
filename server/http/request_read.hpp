// Reading a request off an HTTP connection: the body under its progress
// deadline, and what a failed read of the head or the body is answered
// with (413, 431, 400, 507/500 for the upload spool), or nothing when the
// connection just ends (timeouts, the client closing; those are logged).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "server/config.hpp"
#include "server/http/conn_log.hpp"
#include "server/http/upload_body.hpp"
#include "server/http_front/http_types.hpp"
#include "server/services.hpp"

namespace kcache::server {

// Errors of Beast's HTTP parser (malformed requests), as opposed to
// transport errors (resets, timeouts, the client closing).
bool is_parse_error(const boost::beast::error_code& ec);

// The answer to a request head that could not be read (then the connection
// closes), or nullopt to close without one.
std::optional<Response> head_read_failure(const boost::beast::error_code& ec, const ServerConfig& cfg);

// The same for a body: `limit` and `route` are the route's, `spool_error`
// the upload spool's failure if that stopped the read (counted as a
// rejected upload).
std::optional<Response> body_read_failure(const boost::beast::error_code& ec, const std::optional<Error>& spool_error,
                                          std::uint64_t limit, const std::string& route, Services& s,
                                          ConnLog log);

// Reads the rest of a request body. Progress deadline: bytes must keep
// coming at --min-transfer-rate after a grace of --read-timeout-ms, so a
// writer that stalls is cut off whatever length it declared.
template <class Stream>
boost::asio::awaitable<void> read_body(Stream& stream, boost::beast::flat_buffer& buffer,
                                       boost::beast::http::request_parser<UploadBody>& parser,
                                       const ServerConfig& cfg, boost::beast::error_code& ec) {
  namespace asio = boost::asio;
  auto& tcp = boost::beast::get_lowest_layer(stream);
  const auto start = Clock::now();
  while (!parser.is_done()) {
    const std::uint64_t received = parser.get().body().size();
    tcp.expires_at(start + std::chrono::milliseconds(cfg.read_timeout_ms) +
                   std::chrono::milliseconds(received * 1000 / cfg.min_transfer_rate));
    co_await boost::beast::http::async_read_some(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

}  // namespace kcache::server
