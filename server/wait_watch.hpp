// The connection of a request that waits on another client, read while it
// waits: the client closing (EOF, a reset, over TLS its close_notify or a
// truncated stream) marks the ClientWatch gone and calls its on_gone at
// once, instead of the wait going on to its end holding the connection.
// Bytes that arrive meanwhile (a pipelined next request) are kept in the
// session's buffer for it, up to `keep` bytes held; past that the watch
// stops (a client that sends is alive) and the rest waits in the socket.
//
// The read goes through the session's stream, over TLS through the SSL
// stream (Beast's ssl_stream allows one outstanding read beside one write),
// so TLS records are decrypted, not mistaken for data. The session must
// not read, nor shut the stream down, until stop() has returned; nothing
// writes meanwhile either (the waiting request has not answered yet).
// Thread safety: create, stop and destroy on the session's strand.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/stream_traits.hpp>

#include "server/http_front/client_watch.hpp"

namespace kcache::server {

template <class Stream, class DynamicBuffer>
class WaitWatch {
 public:
  // Starts reading `stream` into `buffer`; `owner` (the session holding
  // both) is kept alive until the read has ended.
  WaitWatch(Stream& stream, DynamicBuffer& buffer, std::size_t keep, std::shared_ptr<ClientWatch> client,
            std::shared_ptr<void> owner)
      : stream_(stream), state_(std::make_shared<State>(stream.get_executor())) {
    boost::asio::co_spawn(stream.get_executor(), read(stream, buffer, keep, std::move(client), state_),
                          [state = state_, owner = std::move(owner)](std::exception_ptr) {
                            state->ended = true;
                            state->ended_signal.cancel();
                          });
  }
  WaitWatch(const WaitWatch&) = delete;
  WaitWatch& operator=(const WaitWatch&) = delete;

  // Ends the watch: cancels the read, if it still runs, and returns once it
  // has finished (the stream is the session's again). The cancel is
  // repeated until then: a read that completed just before it (its handler
  // not yet run) may start another underneath (the TLS stream reads on
  // until it has a whole record), which the first cancel did not reach.
  boost::asio::awaitable<void> stop() {
    state_->stopping = true;
    while (!state_->ended) {
      boost::beast::error_code ignored;
      boost::beast::get_lowest_layer(stream_).socket().cancel(ignored);
      state_->ended_signal.expires_after(std::chrono::milliseconds(5));
      co_await state_->ended_signal.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ignored));
    }
  }

 private:
  struct State {
    template <class Executor>
    explicit State(const Executor& ex) : ended_signal(ex, boost::asio::steady_timer::time_point::max()) {}
    bool stopping = false;  // stop() was called: no further read
    bool ended = false;
    boost::asio::steady_timer ended_signal;  // cancelled when the read has ended
  };

  static boost::asio::awaitable<void> read(Stream& stream, DynamicBuffer& buffer, std::size_t keep,
                                           std::shared_ptr<ClientWatch> client, std::shared_ptr<State> state) {
    while (!state->stopping && buffer.size() < keep) {
      boost::beast::error_code ec;
      const std::size_t n = co_await stream.async_read_some(
          buffer.prepare(keep - buffer.size()), boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      buffer.commit(n);
      if (state->stopping) co_return;  // the request finished first
      if (ec) {
        client->gone = true;
        if (client->on_gone) client->on_gone();
        co_return;
      }
    }
  }

  Stream& stream_;
  std::shared_ptr<State> state_;
};

}  // namespace kcache::server
