// One RESP connection (docs/protocol.md "RESP"): a coroutine on the
// connection's strand that reads bytes into an incremental parser, runs
// every complete command in order (pipelining) and writes their replies
// together.
//
// Limits: a value is at most --resp-max-value-bytes (a larger bulk length is
// a protocol error that closes the connection, as in Redis). Until the
// connection may write (AUTH with a write token, or no --tokens on
// loopback) it sends small commands only: 16 KiB per argument, 10
// arguments (4096 with the read role), 64 KiB (1 MiB) per command. An idle
// connection is closed after --resp-idle-timeout-ms; a command that has
// started arriving must finish within --read-timeout-ms plus its declared
// bytes at --min-transfer-rate, however slowly its bytes come. RESP has its
// own connection budget (--resp-max-connections). Draining closes idle
// connections. Plain TCP only: no TLS on this endpoint.
// Thread safety: start_resp_session() may be called from any thread.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include "server/connections.hpp"
#include "server/resp/resp_commands.hpp"

namespace kcache::server::resp {

void start_resp_session(boost::asio::ip::tcp::socket socket, RespShared& shared, Connections& connections);

}  // namespace kcache::server::resp
