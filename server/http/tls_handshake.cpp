#include "server/http/tls_handshake.hpp"

#include <chrono>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/http/vector_body.hpp>
#include <boost/beast/http/write.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

namespace kcache::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

asio::awaitable<std::optional<bool>> tls_handshake(TlsStream& stream, beast::flat_buffer& buffer, Services& s,
                                                   bool& idle, ConnLog log) {
  beast::error_code ec;
  auto& tcp = beast::get_lowest_layer(stream);
  tcp.expires_after(std::chrono::milliseconds(s.config.read_timeout_ms));
  idle = true;  // nothing asked yet: a drain may close it
  const bool is_tls = co_await beast::async_detect_ssl(tcp, buffer, asio::redirect_error(asio::use_awaitable, ec));
  idle = false;
  if (ec || s.draining.load()) co_return std::nullopt;
  if (!is_tls) {
    http::response<http::vector_body<std::uint8_t>> res{http::status::bad_request, 11};
    res.set(http::field::server, "kcache/0.1");
    res.set(http::field::content_type, "application/json");
    std::string body = R"({"error":"tls_required","message":"this port speaks HTTPS; a plain HTTP request was sent"})";
    body += '\n';
    res.body().assign(body.begin(), body.end());
    res.keep_alive(false);
    res.prepare_payload();
    co_await http::async_write(tcp, res, asio::redirect_error(asio::use_awaitable, ec));
    spdlog::info("conn={} peer={} plain HTTP on the TLS port: answered 400 and closed", log.conn, log.peer);
    co_return std::nullopt;
  }
  const std::size_t used = co_await stream.async_handshake(asio::ssl::stream_base::server, buffer.data(),
                                                           asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    spdlog::info("conn={} peer={} TLS handshake failed: {}", log.conn, log.peer, ec.message());
    co_return std::nullopt;
  }
  buffer.consume(used);
  // The handshake refuses a certificate the client CA did not sign; a
  // client that sent none gets no credit for one.
  SSL* ssl = stream.native_handle();
  X509* cert = SSL_get1_peer_certificate(ssl);
  const bool verified = cert != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
  X509_free(cert);
  co_return verified;
}

}  // namespace kcache::server
