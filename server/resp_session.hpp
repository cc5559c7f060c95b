// One RESP connection (docs/protocol.md "RESP"): a coroutine on the
// connection's strand that reads bytes, runs every complete command in the
// buffer in order (pipelining) and writes their replies together.
//
// Limits: a value is at most --resp-max-value-bytes (a larger bulk length is
// a protocol error that closes the connection, as in Redis). An idle
// connection may stay open (Redis clients pool them); a command that has
// started arriving must finish within --read-timeout-ms. Draining closes
// idle connections. Plain TCP only: no TLS on this endpoint.
// Thread safety: start_resp_session() may be called from any thread.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include "server/connections.hpp"
#include "server/resp_commands.hpp"

namespace kcache::server::resp {

void start_resp_session(boost::asio::ip::tcp::socket socket, RespShared& shared, Connections& connections);

}  // namespace kcache::server::resp
