#include "server/http/http_session.hpp"

#include "server/http/request_head.hpp"
#include "server/http/upload_body.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <spdlog/spdlog.h>

namespace kcache::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

using Body = http::vector_body<std::uint8_t>;
using VectorResponse = http::response<Body>;

// A response body shared, not owned: the bytes stay alive through the
// shared_ptr while the write runs, and are never copied (a Beast Body).
struct SharedBody {
  using value_type = std::shared_ptr<const std::vector<std::uint8_t>>;
  static std::uint64_t size(const value_type& v) { return v ? v->size() : 0; }
  class writer {
   public:
    using const_buffers_type = asio::const_buffer;
    template <bool isRequest, class Fields>
    writer(const http::header<isRequest, Fields>&, const value_type& body) : body_(body) {}
    void init(beast::error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      if (done_ || size(body_) == 0) return boost::none;
      done_ = true;
      return {{const_buffers_type(body_->data(), body_->size()), false}};
    }

   private:
    const value_type& body_;
    bool done_ = false;
  };
};
using BeastResponse = http::response<SharedBody>;

std::atomic<std::uint64_t> g_request_ids{0};

// Errors of Beast's HTTP parser (malformed requests), as opposed to
// transport errors (resets, timeouts, the client closing).
bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

std::chrono::milliseconds transfer_deadline(const ServerConfig& c, std::uint64_t bytes) {
  return std::chrono::milliseconds(c.write_timeout_ms + bytes * 1000 / c.min_transfer_rate);
}

bool is_loopback(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  return a.is_loopback();
}

BeastResponse to_beast(Response&& r, unsigned version, bool head, bool keep_alive, std::uint64_t request_id) {
  BeastResponse res;
  res.version(version);
  res.result(static_cast<unsigned>(r.status));
  res.set(http::field::server, "kcache/0.1");
  res.set("X-Kcache-Request-Id", std::to_string(request_id));
  for (auto& [k, v] : r.headers) res.insert(k, v);
  const std::uint64_t length = r.shared_body ? r.shared_body->size() : r.body.size();
  if (head) {
    res.content_length(r.head_length ? *r.head_length : length);
  } else {
    res.body() = r.shared_body ? std::move(r.shared_body)
                               : std::make_shared<const std::vector<std::uint8_t>>(std::move(r.body));
    res.content_length(length);
  }
  res.keep_alive(keep_alive);
  return res;
}

// One connection. Stream is PlainStream (HTTP) or TlsStream (HTTPS: the
// handshake runs first, under the read deadline; see handshake()).
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
  asio::awaitable<bool> handshake();
  asio::awaitable<void> serve();
  // Writes r (closing afterwards when it says so) and logs it. Takes a
  // named Response: g++ 12 mishandles non-trivial temporaries inside
  // co_await expressions.
  asio::awaitable<bool> respond(Response& r, const Request& req, unsigned version, bool head, bool keep_alive,
                                Clock::time_point started, std::uint64_t bytes_in);
  asio::awaitable<void> lingering_close();
  asio::awaitable<void> final_close();
  // Reads the rest of a request body. Progress deadline: bytes must keep
  // coming at --min-transfer-rate after a grace of --read-timeout-ms, so a
  // writer that stalls is cut off whatever length it declared.
  asio::awaitable<void> read_body(http::request_parser<UploadBody>& parser, beast::error_code& ec);
  // While a request waits: when the socket turns readable, a peek tells a
  // closed connection (EOF, reset) from the client's next request; the
  // first ends the wait (req.watch).
  void watch_client(Request& req) {
    req.watch = std::make_shared<ClientWatch>();
    lowest().socket().async_wait(
        tcp::socket::wait_read, [self = this->shared_from_this(), watch = req.watch](const beast::error_code& ec) {
          if (ec) return;  // cancelled: the request finished first
          char c;
          const ssize_t n = ::recv(self->lowest().socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;  // alive
          watch->gone = true;
          if (watch->on_gone) watch->on_gone();
        });
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
asio::awaitable<bool> Session<Stream>::respond(Response& r, const Request& req, unsigned version, bool head,
                                       bool keep_alive, Clock::time_point started, std::uint64_t bytes_in) {
  keep_alive = keep_alive && !r.close && !s_.draining.load();
  const int status = r.status;
  const std::string route = r.route.empty() ? "unmatched" : r.route;
  const std::string key = r.key;
  auto res = to_beast(std::move(r), version, head, keep_alive, req.id);
  const std::uint64_t bytes_out = head ? 0 : SharedBody::size(res.body());
  beast::error_code ec;
  lowest().expires_after(transfer_deadline(s_.config, bytes_out));
  co_await http::async_write(stream_, res, asio::redirect_error(asio::use_awaitable, ec));
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const std::string method = req.method.empty() ? "-" : req.method;
  s_.metrics.record_request(route, method, status, seconds, bytes_in, ec ? 0 : bytes_out);
  if (s_.config.access_log) {
    spdlog::info("access id={} conn={} peer={} method={} route={} key={} status={} in={} out={} ms={:.3f}{}", req.id,
                 id_, peer_, method, route, key.empty() ? "-" : key, status, bytes_in, bytes_out, seconds * 1000,
                 ec ? " write_error=" + ec.message() : "");
  }
  if (ec) co_return false;
  if (!keep_alive) co_await lingering_close();
  co_return keep_alive;
}

// Half-close, then drain what the client still sends for a moment, so the
// answer is not lost to a reset caused by unread request bytes. Over TLS the
// half-close is the close_notify alert (the shutdown reads until the
// client's own close_notify or EOF).
template <class Stream>
asio::awaitable<void> Session<Stream>::lingering_close() {
  beast::error_code ec;
  lowest().expires_after(std::chrono::milliseconds(500));
  if constexpr (k_tls) {
    co_await stream_.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  } else {
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 16384> sink;
    std::size_t drained = 0;
    while (!ec && drained < (1u << 20)) {
      drained += co_await stream_.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  lowest().close();
}

template <class Stream>
asio::awaitable<void> Session<Stream>::final_close() {
  beast::error_code ignored;
  if constexpr (k_tls) {
    if (lowest().socket().is_open()) {
      lowest().expires_after(std::chrono::milliseconds(500));
      co_await stream_.async_shutdown(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
  lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  lowest().close();
}

// TLS only: a client speaking plain HTTP to the TLS port gets a plain 400
// (as nginx does) instead of a silent close; a failed handshake (wrong CA,
// no client certificate under mTLS) closes the connection, logged at debug.
template <class Stream>
asio::awaitable<bool> Session<Stream>::handshake() {
  if constexpr (!k_tls) {
    co_return true;
  } else {
    beast::error_code ec;
    lowest().expires_after(std::chrono::milliseconds(s_.config.read_timeout_ms));
    idle_ = true;  // nothing asked yet: a drain may close it
    const bool is_tls =
        co_await beast::async_detect_ssl(lowest(), buffer_, asio::redirect_error(asio::use_awaitable, ec));
    idle_ = false;
    if (ec || s_.draining.load()) co_return false;
    if (!is_tls) {
      VectorResponse res{http::status::bad_request, 11};
      res.set(http::field::server, "kcache/0.1");
      res.set(http::field::content_type, "application/json");
      std::string body =
          R"({"error":"tls_required","message":"this port speaks HTTPS; a plain HTTP request was sent"})";
      body += '\n';
      res.body().assign(body.begin(), body.end());
      res.keep_alive(false);
      res.prepare_payload();
      co_await http::async_write(lowest(), res, asio::redirect_error(asio::use_awaitable, ec));
      spdlog::info("conn={} peer={} plain HTTP on the TLS port: answered 400 and closed", id_, peer_);
      co_return false;
    }
    const std::size_t used = co_await stream_.async_handshake(asio::ssl::stream_base::server, buffer_.data(),
                                                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      spdlog::info("conn={} peer={} TLS handshake failed: {}", id_, peer_, ec.message());
      co_return false;
    }
    buffer_.consume(used);
    // The handshake refuses a certificate the client CA did not sign; a
    // client that sent none gets no credit for one.
    SSL* ssl = stream_.native_handle();
    X509* cert = SSL_get1_peer_certificate(ssl);
    cert_verified_ = cert != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
    X509_free(cert);
    co_return true;
  }
}

template <class Stream>
asio::awaitable<void> Session<Stream>::read_body(http::request_parser<UploadBody>& parser, beast::error_code& ec) {
  const auto& cfg = s_.config;
  const auto start = Clock::now();
  while (!parser.is_done()) {
    const std::uint64_t received = parser.get().body().size();
    lowest().expires_at(start + std::chrono::milliseconds(cfg.read_timeout_ms) +
                        std::chrono::milliseconds(received * 1000 / cfg.min_transfer_rate));
    co_await http::async_read_some(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

template <class Stream>
asio::awaitable<void> Session<Stream>::run() {
  const bool ok = co_await handshake();
  if (ok) co_await serve();
  co_await final_close();
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
      if (ec == http::error::header_limit || is_parse_error(ec)) req.id = ++g_request_ids;
      if (ec == http::error::body_limit) {
        Response r = error_response(413, "too_large", "the body exceeds the limit of " +
                                                          std::to_string(cfg.max_body_bytes) + " bytes");
        co_await respond(r, req, 11, false, false, started, 0);
      } else if (ec == http::error::header_limit) {
        Response r = error_response(431, "headers_too_large",
                                    "request line and headers exceed " + std::to_string(cfg.max_header_bytes) + " bytes");
        co_await respond(r, req, 11, false, false, started, 0);
      } else if (ec == beast::error::timeout) {
        if (buffer_.size() > 0) spdlog::info("conn={} peer={} cut off: request headers not complete in time", id_, peer_);
      } else if (is_parse_error(ec)) {
        Response r = error_response(400, "bad_request", "malformed HTTP request: " + ec.message());
        co_await respond(r, req, 11, false, false, started, 0);
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
      co_await read_body(parser, ec);
      if (ec) {
        if (const auto& spool_error = parser.get().body().spool_error) {
          spdlog::warn("conn={} peer={} upload refused: {}", id_, peer_, spool_error->message);
          s_.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
          s_.metrics.storage_error("spool");
          auto r = spool_error->code == Errc::full
                       ? error_response(507, "spool_full",
                                        "no room on the server to hold the upload, nothing stored (" +
                                            spool_error->message + "); retry later")
                       : error_response(500, "spool_error",
                                        "the server could not hold the upload, nothing stored (" +
                                            spool_error->message + ")");
          r.route = route.tmpl;
          r.close = true;
          if (spool_error->code == Errc::full) r.headers.emplace_back("Retry-After", "5");
          co_await respond(r, req, version, head, false, started, 0);
        } else if (ec == http::error::body_limit) {
          auto r = error_response(413, "too_large", "the body exceeds the limit of " + std::to_string(limit) + " bytes");
          r.route = route.tmpl;
          r.close = true;
          co_await respond(r, req, version, head, false, started, 0);
        } else if (ec == beast::error::timeout) {
          spdlog::info("conn={} peer={} cut off: request body not complete in time", id_, peer_);
        } else if (ec == http::error::partial_message || ec == http::error::end_of_stream || ec == asio::error::eof) {
          spdlog::info("conn={} peer={} closed mid-body; request dropped", id_, peer_);
        } else if (is_parse_error(ec)) {
          Response r = error_response(400, "bad_request", "malformed body: " + ec.message());
          co_await respond(r, req, version, head, false, started, 0);
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
    if (may_wait) watch_client(req);
    Response r = co_await handle_request(s_, req, route);
    if (may_wait) {
      beast::error_code ignored;
      lowest().socket().cancel(ignored);  // ends the watch (nothing else is pending on the socket)
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

asio::awaitable<void> reject(beast::tcp_stream stream) {
  VectorResponse res{http::status::service_unavailable, 11};
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

void start_session(tcp::socket socket, Services& services, Connections& connections,
                   std::shared_ptr<asio::ssl::context> tls) {
  if (tls) {
    std::make_shared<Session<TlsStream>>(std::move(socket), services, connections, std::move(tls))->start();
  } else {
    std::make_shared<Session<PlainStream>>(std::move(socket), services, connections, nullptr)->start();
  }
}

void reject_connection(tcp::socket socket, Services& services) {
  services.metrics.connections_rejected.fetch_add(1, std::memory_order_relaxed);
  auto ex = socket.get_executor();
  asio::co_spawn(ex, reject(beast::tcp_stream(std::move(socket))), asio::detached);
}

}  // namespace kcache::server
