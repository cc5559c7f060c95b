// HTTP/1.1 over Boost.Beast, plain or TLS. Each exchange opens one
// connection (the CLI makes a handful of requests), and all of its steps
// share one deadline enforced by beast::tcp_stream's timer.
#include "cli/http_transport.hpp"

#include <openssl/ssl.h>

#include <memory>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/http_url.hpp"

namespace kcache::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

// Largest body read back: a bundle (2 GiB) with headroom.
constexpr std::uint64_t k_max_reply_bytes = 4ull << 30;

// Runs one asynchronous step to completion on `ioc` and returns its error.
template <class Start>
error_code run_step(asio::io_context& ioc, Start start) {
  error_code result = asio::error::would_block;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

Error unreachable(const Endpoint& ep, const std::string& step, const error_code& ec) {
  return make_error(Errc::unavailable,
                    "cannot reach kcache-server at " + ep.url + " (" + step + " " + ep.host + ":" +
                        ep.port + ": " + ec.message() +
                        "). Is the server running there? Point kcache at it with --server URL or "
                        "KCACHE_URL.");
}

}  // namespace

Result<Endpoint> parse_url(const std::string& url) {
  auto u = parse_http_url(url);
  if (!u) return make_error(Errc::invalid_argument, "--server " + url + ": " + u.error().message);
  return Endpoint{u->tls ? "https" : "http", u->host, u->port, u->prefix, url};
}

std::string HttpReply::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpTransport::HttpTransport(Endpoint endpoint, std::string token, TlsFiles tls)
    : endpoint_(std::move(endpoint)), token_(std::move(token)), tls_(std::move(tls)) {}

namespace {

Error timed_out(const Endpoint& ep, const HttpRequest& req, const std::string& what) {
  return make_error(Errc::timeout, what + " (" + ep.url + ") did not finish within " +
                                       std::to_string(req.timeout.count() / 1000) +
                                       " s; raise --timeout if the cache is large");
}

// Write the request, read the answer: the same over TCP and over TLS.
template <class Stream>
Result<HttpReply> exchange(Stream& stream, asio::io_context& ioc, const Endpoint& ep,
                           const std::string& token, const HttpRequest& req) {
  auto verb = http::string_to_verb(req.method);
  http::request<http::string_body> out{verb, ep.base_path + req.target, 11};
  out.set(http::field::host, ep.host + ":" + ep.port);
  out.set(http::field::user_agent, std::string("kcache-cli/") + KCACHE_CLI_VERSION);
  out.set(http::field::connection, "close");
  if (!token.empty()) out.set(http::field::authorization, "Bearer " + token);
  for (const auto& [name, value] : req.headers) out.set(name, value);
  out.body() = req.body;
  if (!req.body.empty() || verb == http::verb::post || verb == http::verb::put)
    out.prepare_payload();

  error_code ec = run_step(ioc, [&](auto handler) { http::async_write(stream, out, handler); });
  if (ec == beast::error::timeout) return timed_out(ep, req, "sending the request");
  if (ec) return unreachable(ep, "sending to", ec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(k_max_reply_bytes);
  ec = run_step(ioc, [&](auto handler) { http::async_read(stream, buffer, parser, handler); });
  if (ec == beast::error::timeout) {
    return timed_out(ep, req, "kcache-server's answer to " + req.method + " " + req.target);
  }
  if (ec) return unreachable(ep, "reading the answer from", ec);

  auto res = parser.release();
  HttpReply reply;
  reply.status = res.result_int();
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(field.value());
  }
  reply.body = std::move(res.body());
  return reply;
}

// A context that verifies the server (its chain and its name) and, when
// given, presents a client certificate.
Result<std::unique_ptr<ssl::context>> tls_context(const TlsFiles& files, const std::string& host) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  error_code ec;
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (auto s = load_tls_files(ctx->native_handle(), files, {"--cacert", "--cert", "--key"},
                              /*system_ca_by_default=*/true);
      !s) {
    return s.error();
  }
  ctx->set_verify_callback(ssl::host_name_verification(host), ec);
  if (ec) return make_error(Errc::internal, "TLS host name check: " + ec.message());
  return ctx;
}

}  // namespace

Result<HttpReply> HttpTransport::send(const HttpRequest& req) const {
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  const auto deadline = std::chrono::steady_clock::now() + req.timeout;

  tcp::resolver::results_type addrs;
  error_code ec = run_step(ioc, [&](auto handler) {
    resolver.async_resolve(endpoint_.host, endpoint_.port,
                           [&addrs, handler](error_code e, tcp::resolver::results_type r) mutable {
                             addrs = std::move(r);
                             handler(e);
                           });
  });
  if (ec) return unreachable(endpoint_, "resolving", ec);

  stream.expires_at(deadline);
  ec = run_step(ioc, [&](auto handler) { stream.async_connect(addrs, handler); });
  if (ec == beast::error::timeout) {
    return make_error(Errc::timeout,
                      "no connection to kcache-server at " + endpoint_.url + " within the " +
                          std::to_string(req.timeout.count() / 1000) + " s deadline (--timeout)");
  }
  if (ec) return unreachable(endpoint_, "connecting to", ec);

  if (endpoint_.scheme != "https") {
    auto reply = exchange(stream, ioc, endpoint_, token_, req);
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return reply;
  }
  auto ctx = tls_context(tls_, endpoint_.host);
  if (!ctx) return ctx.error();
  beast::ssl_stream<beast::tcp_stream> tls(std::move(stream), **ctx);
  error_code addr_ec;
  asio::ip::make_address(endpoint_.host, addr_ec);
  if (addr_ec) SSL_set_tlsext_host_name(tls.native_handle(), endpoint_.host.c_str());  // SNI: names only
  ec = run_step(ioc, [&](auto handler) { tls.async_handshake(ssl::stream_base::client, handler); });
  if (ec == beast::error::timeout) return timed_out(endpoint_, req, "the TLS handshake");
  if (ec) {
    return make_error(Errc::unavailable,
                      "TLS handshake with kcache-server at " + endpoint_.url + " failed: " + ec.message() +
                          ". Give the CA that signed the server's certificate with --cacert "
                          "(KCACHE_CA_FILE) and, if the server requires client certificates, "
                          "--cert and --key (KCACHE_CLIENT_CERT, KCACHE_CLIENT_KEY).");
  }
  auto reply = exchange(tls, ioc, endpoint_, token_, req);
  error_code ignored;
  beast::get_lowest_layer(tls).socket().shutdown(tcp::socket::shutdown_both, ignored);
  return reply;
}

}  // namespace kcache::cli
