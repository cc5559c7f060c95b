// One HTTP/1.1 connection: a coroutine loop on the connection's strand that
// reads a request (headers, then the body, each under its own deadline and
// limit), asks the route handlers for the answer and writes it, until the
// client closes, keep-alive ends, a deadline passes or the server drains.
//
// Limits: --max-header-bytes (431), the route's body limit (413, answered
// from the Content-Length before any body byte is read), read deadlines
// (slow or stalled clients are cut off), write deadlines. Unread request
// bodies end the connection after the answer.
// The parts, each in its own file: session_streams.hpp (plain or TLS),
// tls_handshake.hpp, request_read.hpp (the body read, and what a failed
// read is answered with), server/wait_watch.hpp (the connection read while
// a GET waits), response_write.hpp (the answer written, keep-alive),
// beast_response.hpp (the answer as Beast writes it), session_close.hpp;
// a connection over --max-connections is connection_reject.hpp's.
// Thread safety: a session lives on its strand; start_session() may be
// called from any thread.
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

}  // namespace kcache::server
