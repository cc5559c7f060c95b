// One HTTP/1.1 connection: a coroutine loop on the connection's strand that
// reads a request (headers, then the body, each under its own deadline and
// limit), asks the route handlers for the answer and writes it, until the
// client closes, keep-alive ends, a deadline passes or the server drains.
//
// Limits: --max-header-bytes (431), the route's body limit (413, answered
// from the Content-Length before any body byte is read), read deadlines
// (slow or stalled clients are cut off), write deadlines. Unread request
// bodies end the connection after the answer.
// Thread safety: a session lives on its strand; start_session() and
// reject_connection() may be called from any thread.
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "server/connections.hpp"
#include "server/services.hpp"

namespace boost::asio::ssl {
class context;
}

namespace kcache::server {

// With `tls`, the session speaks HTTPS with that context (held for the
// connection's life); without, plain HTTP.
void start_session(boost::asio::ip::tcp::socket socket, Services& services, Connections& connections,
                   std::shared_ptr<boost::asio::ssl::context> tls);

// Answers 503 with Retry-After on a connection over --max-connections, then
// closes it.
void reject_connection(boost::asio::ip::tcp::socket socket, Services& services);

}  // namespace kcache::server
