// The two streams an HTTP session speaks over: plain TCP, or TLS over TCP
// (Beast's ssl_stream: one read may be outstanding beside one write).
#pragma once

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace kcache::server {

using PlainStream = boost::beast::tcp_stream;
using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

}  // namespace kcache::server
