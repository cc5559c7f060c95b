#include "server/http/connection_reject.hpp"

#include <chrono>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/vector_body.hpp>
#include <boost/beast/http/write.hpp>

namespace kcache::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

asio::awaitable<void> reject(beast::tcp_stream stream) {
  http::response<http::vector_body<std::uint8_t>> res{http::status::service_unavailable, 11};
  res.set(http::field::server, "kcache/0.1");
  res.set(http::field::retry_after, "1");
  res.set(http::field::content_type, "application/json");
  std::string body = R"({"error":"too_many_connections","message":"the server is at its connection limit; retry"})";
  body += '\n';
  res.body().assign(body.begin(), body.end());
  res.keep_alive(false);
  res.prepare_payload();
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(2));
  co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream.close();
}

}  // namespace

void reject_connection(tcp::socket socket, Services& services) {
  services.metrics.connections_rejected.fetch_add(1, std::memory_order_relaxed);
  auto ex = socket.get_executor();
  asio::co_spawn(ex, reject(beast::tcp_stream(std::move(socket))), asio::detached);
}

}  // namespace kcache::server
