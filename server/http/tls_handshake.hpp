// The start of an HTTPS connection. A client speaking plain HTTP to the TLS
// port gets a plain 400 (as nginx does) instead of a silent close; a failed
// handshake (wrong CA, no client certificate under mTLS) closes the
// connection, logged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "server/http/conn_log.hpp"
#include "server/http/session_streams.hpp"
#include "server/services.hpp"

namespace kcache::server {

// Detects TLS, then shakes hands, all under --read-timeout-ms; bytes read
// past the handshake stay in `buffer`. `idle` is true while nothing has
// arrived (a drain may close the connection then). Returns whether the
// client showed a certificate the client CA signed, or nullopt when the
// connection is to be closed (also when the server began draining).
boost::asio::awaitable<std::optional<bool>> tls_handshake(TlsStream& stream, boost::beast::flat_buffer& buffer,
                                                          Services& s, bool& idle, ConnLog log);

}  // namespace kcache::server
