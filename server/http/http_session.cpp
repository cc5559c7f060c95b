#include "server/http/http_session.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "server/http/handlers.hpp"
#include "server/http/request_read.hpp"
#include "server/http/response_write.hpp"
#include "server/http/session_close.hpp"
#include "server/http/session_streams.hpp"
#include "server/http/tls_handshake.hpp"
#include "server/http/upload_body.hpp"
#include "server/http_front/request_head.hpp"
#include "server/wait_watch.hpp"

namespace kcache::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::atomic<std::uint64_t> g_request_ids{0};

bool is_loopback(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  return a.is_loopback();
}

// One connection. Stream is PlainStream (HTTP) or TlsStream (HTTPS: the
// handshake runs first, under the read deadline; see tls_handshake.hpp).
template <class Stream>
class Session final : public SessionHandle, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool k_tls = std::is_same_v<Stream, TlsStream>;

 public:
  Session(tcp::socket socket, Services& s, Connections& c, std::shared_ptr<asio::ssl::context> tls)
      : tls_ctx_(std::move(tls)), stream_(make_stream(std::move(socket), tls_ctx_)), s_(s), connections_(c) {
    beast::error_code ec;
    auto ep = lowest().socket().remote_endpoint(ec);
    if (!ec) {
      peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
      loopback_ = is_loopback(ep.address());
    }
  }

  ~Session() override {
    if (id_) connections_.remove(id_);
  }

  void start() {
    id_ = connections_.add(this->shared_from_this());
    asio::co_spawn(stream_.get_executor(), [self = this->shared_from_this()] { return self->run(); }, asio::detached);
  }

  void close_if_idle() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->idle_) self->lowest().cancel();
    });
  }

 private:
  static Stream make_stream(tcp::socket socket, const std::shared_ptr<asio::ssl::context>& tls) {
    if constexpr (k_tls) {
      return Stream(std::move(socket), *tls);
    } else {
      (void)tls;
      return Stream(std::move(socket));
    }
  }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  asio::awaitable<void> run();
  asio::awaitable<void> serve();
  // Writes r and says whether the connection goes on (response_write.hpp).
  asio::awaitable<bool> respond(Response& r, const Request& req, unsigned version, bool head, bool keep_alive,
                                Clock::time_point started, std::uint64_t bytes_in) {
    return write_response(stream_, s_, ConnLog{id_, peer_}, r, req, version, head, keep_alive, started, bytes_in);
  }

  // Keeps the context this connection shook hands with alive (a SIGHUP
  // reload swaps the server's current one). Declared before stream_.
  std::shared_ptr<asio::ssl::context> tls_ctx_;
  Stream stream_;
  beast::flat_buffer buffer_;
  Services& s_;
  Connections& connections_;
  std::uint64_t id_ = 0;
  std::string peer_;
  bool loopback_ = false;
  bool cert_verified_ = false;  // TLS: the client showed a certificate the client CA signed
  bool idle_ = false;  // waiting for a request's first byte (only touched on the strand)
};

template <class Stream>
asio::awaitable<void> Session<Stream>::run() {
  bool ok = true;
  if constexpr (k_tls) {
    const auto verified = co_await tls_handshake(stream_, buffer_, s_, idle_, ConnLog{id_, peer_});
    ok = verified.has_value();
    cert_verified_ = verified.value_or(false);
  }
  if (ok) co_await serve();
  co_await final_close(stream_);
}

template <class Stream>
asio::awaitable<void> Session<Stream>::serve() {
  const ServerConfig& cfg = s_.config;
  for (;;) {
    http::request_parser<UploadBody> parser;
    parser.header_limit(cfg.max_header_bytes);
    // Beast checks Content-Length against body_limit while parsing headers;
    // allow the largest any route takes and apply the route's own below.
    parser.body_limit(std::max(cfg.max_body_bytes, cfg.max_json_body_bytes));
    beast::error_code ec;
    idle_ = buffer_.size() == 0;
    if (s_.draining.load() && idle_) break;
    lowest().expires_after(std::chrono::milliseconds(cfg.read_timeout_ms));
    co_await http::async_read_header(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    idle_ = false;
    const auto started = Clock::now();
    Request req;
    UploadGrant upload;
    req.peer = peer_;
    req.peer_loopback = loopback_;
    req.client_cert_verified = cert_verified_;
    if (ec) {
      if (auto r = head_read_failure(ec, cfg)) {
        req.id = ++g_request_ids;
        co_await respond(*r, req, 11, false, false, started, 0);
      } else if (ec == beast::error::timeout && buffer_.size() > 0) {
        spdlog::info("conn={} peer={} cut off: request headers not complete in time", id_, peer_);
      }
      break;
    }
    req.id = ++g_request_ids;
    auto& h = parser.get();
    fill_request_head(h, req);
    const unsigned version = h.version();
    const bool head = h.method() == http::verb::head;
    const bool keep_alive = h.keep_alive();
    const bool has_body = parser.chunked() || (parser.content_length() && *parser.content_length() > 0);
    auto early = [&](Response r) {
      if (has_body) r.close = true;  // the unread body would be taken for the next request
      return r;
    };

    auto qpos = req.target.find('?');
    req.path = req.target.substr(0, qpos);
    auto query = parse_query(qpos == std::string::npos ? std::string_view{} : std::string_view(req.target).substr(qpos + 1));
    if (!query) {
      Response r = early(error_response(400, "bad_query", "malformed percent-escape in the query"));
      if (!co_await respond(r, req, version, head, keep_alive, started, 0)) break;
      continue;
    }
    req.query = std::move(*query);

    auto pre = preflight(s_, req);
    if (auto* pr = std::get_if<Response>(&pre)) {
      Response r = early(std::move(*pr));
      if (!co_await respond(r, req, version, head, keep_alive, started, 0)) break;
      continue;
    }
    const RouteMatch route = std::get<RouteMatch>(pre);

    const std::uint64_t limit =
        takes_large_body(route.id, req.method) ? cfg.max_body_bytes : cfg.max_json_body_bytes;
    if (parser.content_length() && *parser.content_length() > limit) {
      auto r = error_response(413, "too_large", "the body exceeds the limit of " + std::to_string(limit) + " bytes");
      r.route = route.tmpl;
      r.key = route.key;
      r.close = true;
      co_await respond(r, req, version, head, false, started, 0);
      break;
    }
    parser.body_limit(limit);
    if (takes_large_body(route.id, req.method)) {
      // Past the threshold the bytes go to a nameless file, not to memory.
      parser.get().body().spool_above = cfg.upload_spool_threshold;
      parser.get().body().spool_dir = cfg.upload_spool_dir;
    }
    if (has_body) {
      if (const std::string* expect = req.header("expect"); expect && beast::iequals(*expect, "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, version};
        lowest().expires_after(std::chrono::milliseconds(cfg.write_timeout_ms));
        co_await http::async_write(stream_, cont, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
      }
      // The body's bytes count against the server-wide budget before any is
      // read (a chunked body counts as the route's limit).
      if (!upload.take(s_.upload_bytes_in_flight, cfg.max_upload_bytes_in_flight,
                       parser.content_length().value_or(limit))) {
        auto r = error_response(503, "uploads_busy",
                                "the server holds as many upload bytes as it may; retry shortly");
        r.route = route.tmpl;
        r.close = true;
        r.headers.emplace_back("Retry-After", "1");
        co_await respond(r, req, version, head, false, started, 0);
        break;
      }
      co_await read_body(stream_, buffer_, parser, cfg, ec);
      if (ec) {
        if (auto r = body_read_failure(ec, parser.get().body().spool_error, limit, route.tmpl, s_, ConnLog{id_, peer_})) {
          co_await respond(*r, req, version, head, false, started, 0);
        }
        break;
      }
    }
    auto& received = parser.get().body();
    const std::uint64_t bytes_in = received.size();
    if (received.spool) {
      req.spool = std::move(received.spool);
    } else {
      req.body = std::move(received.memory);
    }
    lowest().expires_never();  // a waiting GET may take long; the socket is idle meanwhile
    const bool may_wait = req.method == "GET" && req.query.count("wait_ms") != 0;
    std::optional<WaitWatch<Stream, beast::flat_buffer>> watch;
    if (may_wait) {
      // A pipelined next request read meanwhile is kept, up to a head's worth.
      req.watch = std::make_shared<ClientWatch>();
      watch.emplace(stream_, buffer_, cfg.max_header_bytes, req.watch, this->shared_from_this());
    }
    Response r = co_await handle_request(s_, req, route);
    if (watch) {
      co_await watch->stop();
      if (req.watch->gone) {
        spdlog::info("conn={} peer={} went away while its GET waited; wait ended", id_, peer_);
        break;
      }
    }
    req.body = {};
    req.spool.reset();  // closing the descriptor frees the spooled bytes
    upload.release();
    if (!co_await respond(r, req, version, head, keep_alive, started, bytes_in)) break;
  }
}

}  // namespace

void start_session(tcp::socket socket, Services& services, Connections& connections,
                   std::shared_ptr<asio::ssl::context> tls) {
  if (tls) {
    std::make_shared<Session<TlsStream>>(std::move(socket), services, connections, std::move(tls))->start();
  } else {
    std::make_shared<Session<PlainStream>>(std::move(socket), services, connections, nullptr)->start();
  }
}

}  // namespace kcache::server
