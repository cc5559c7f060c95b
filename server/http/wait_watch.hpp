// While a request waits (GET ?wait_ms on another client's lease): the
// connection is watched, so a client that goes away ends the wait and frees
// its slot instead of holding it until the wait's end.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>

#include "server/http/http_types.hpp"

namespace kcache::server {

// When the socket turns readable, a peek tells a closed connection (EOF,
// reset) from the client's next request; the first marks `watch` gone and
// calls its on_gone. `owner` is kept alive until then. Cancel the socket's
// operations to stop watching.
inline void watch_for_close(boost::asio::ip::tcp::socket& socket, std::shared_ptr<ClientWatch> watch,
                            std::shared_ptr<void> owner) {
  socket.async_wait(boost::asio::ip::tcp::socket::wait_read,
                    [&socket, owner = std::move(owner), watch = std::move(watch)](const boost::beast::error_code& ec) {
                      if (ec) return;  // cancelled: the request finished first
                      char c;
                      const ssize_t n = ::recv(socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
                      if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
                      watch->gone = true;
                      if (watch->on_gone) watch->on_gone();
                    });
}

}  // namespace kcache::server
