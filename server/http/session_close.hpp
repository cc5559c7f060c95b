// How an HTTP session closes its connection, over either stream
// (session_streams.hpp).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <type_traits>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/stream_traits.hpp>

#include "server/http/session_streams.hpp"

namespace kcache::server {

// After an answer that ends the connection: half-close, then drain what the
// client still sends for a moment, so the answer is not lost to a reset
// caused by unread request bytes. Over TLS the half-close is the
// close_notify alert (the shutdown reads until the client's own close_notify
// or EOF).
template <class Stream>
boost::asio::awaitable<void> lingering_close(Stream& stream) {
  namespace asio = boost::asio;
  boost::beast::error_code ec;
  auto& tcp = boost::beast::get_lowest_layer(stream);
  tcp.expires_after(std::chrono::milliseconds(500));
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  } else {
    tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    std::array<char, 16384> sink;
    std::size_t drained = 0;
    while (!ec && drained < (1u << 20)) {
      drained += co_await stream.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  tcp.close();
}

// The session's end, whatever ended it: over TLS a close_notify if the
// socket is still open, then the socket closed.
template <class Stream>
boost::asio::awaitable<void> final_close(Stream& stream) {
  namespace asio = boost::asio;
  boost::beast::error_code ignored;
  auto& tcp = boost::beast::get_lowest_layer(stream);
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    if (tcp.socket().is_open()) {
      tcp.expires_after(std::chrono::milliseconds(500));
      co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
  tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  tcp.close();
}

}  // namespace kcache::server
