// A connection over --max-connections (plain HTTP): answered 503 with
// Retry-After, then closed. May be called from any thread.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include "server/services.hpp"

namespace kcache::server {

void reject_connection(boost::asio::ip::tcp::socket socket, Services& services);

}  // namespace kcache::server
