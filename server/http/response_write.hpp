// Answering on an HTTP connection: the response written under its deadline
// (--write-timeout-ms plus its size at --min-transfer-rate), counted in the
// metrics and the access log, then keep-alive decided: the connection goes
// on unless the request or the answer ends it, the server drains, or the
// write failed (then it is closed, lingering so the answer is not lost to a
// reset).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>

#include "server/http/beast_response.hpp"
#include "server/http/conn_log.hpp"
#include "server/http/session_close.hpp"
#include "server/http_front/http_types.hpp"
#include "server/services.hpp"

namespace kcache::server {

// Writes r (closing afterwards when it says so); returns whether the
// connection stays open for another request. Takes a named Response: g++ 12
// mishandles non-trivial temporaries inside co_await expressions.
template <class Stream>
boost::asio::awaitable<bool> write_response(Stream& stream, Services& s, ConnLog log, Response& r, const Request& req,
                                            unsigned version, bool head, bool keep_alive, Clock::time_point started,
                                            std::uint64_t bytes_in) {
  namespace asio = boost::asio;
  keep_alive = keep_alive && !r.close && !s.draining.load();
  const int status = r.status;
  const std::string route = r.route.empty() ? "unmatched" : r.route;
  const std::string key = r.key;
  auto res = to_beast(std::move(r), version, head, keep_alive, req.id);
  const std::uint64_t bytes_out = head ? 0 : SharedBody::size(res.body());
  boost::beast::error_code ec;
  boost::beast::get_lowest_layer(stream).expires_after(transfer_deadline(s.config, bytes_out));
  co_await boost::beast::http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const std::string method = req.method.empty() ? "-" : req.method;
  s.metrics.record_request(route, method, status, seconds, bytes_in, ec ? 0 : bytes_out);
  if (s.config.access_log) {
    spdlog::info("access id={} conn={} peer={} method={} route={} key={} status={} in={} out={} ms={:.3f}{}", req.id,
                 log.conn, log.peer, method, route, key.empty() ? "-" : key, status, bytes_in, bytes_out,
                 seconds * 1000, ec ? " write_error=" + ec.message() : "");
  }
  if (ec) co_return false;
  if (!keep_alive) co_await lingering_close(stream);
  co_return keep_alive;
}

}  // namespace kcache::server
