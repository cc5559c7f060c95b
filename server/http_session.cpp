#include "server/http_session.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace kcache::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Body = http::vector_body<std::uint8_t>;
using BeastResponse = http::response<Body>;

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
  if (head) {
    res.content_length(r.head_length ? *r.head_length : r.body.size());
  } else {
    res.body() = std::move(r.body);
    res.prepare_payload();
  }
  res.keep_alive(keep_alive);
  return res;
}

class Session final : public SessionHandle, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Services& s, Connections& c) : stream_(std::move(socket)), s_(s), connections_(c) {
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
      loopback_ = is_loopback(ep.address());
    }
  }

  ~Session() override {
    if (id_) connections_.remove(id_);
  }

  void start() {
    id_ = connections_.add(shared_from_this());
    asio::co_spawn(stream_.get_executor(), [self = shared_from_this()] { return self->run(); }, asio::detached);
  }

  void close_if_idle() override {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->stream_.cancel();
    });
  }

 private:
  asio::awaitable<void> run();
  // Writes r (closing afterwards when it says so) and logs it. Takes a
  // named Response: g++ 12 mishandles non-trivial temporaries inside
  // co_await expressions.
  asio::awaitable<bool> respond(Response& r, const Request& req, unsigned version, bool head, bool keep_alive,
                                Clock::time_point started, std::uint64_t bytes_in);
  asio::awaitable<void> lingering_close();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  Services& s_;
  Connections& connections_;
  std::uint64_t id_ = 0;
  std::string peer_;
  bool loopback_ = false;
  bool idle_ = false;  // waiting for a request's first byte (only touched on the strand)
};

asio::awaitable<bool> Session::respond(Response& r, const Request& req, unsigned version, bool head,
                                       bool keep_alive, Clock::time_point started, std::uint64_t bytes_in) {
  keep_alive = keep_alive && !r.close && !s_.draining.load();
  const int status = r.status;
  const std::string route = r.route.empty() ? "unmatched" : r.route;
  const std::string key = r.key;
  auto res = to_beast(std::move(r), version, head, keep_alive, req.id);
  const std::uint64_t bytes_out = head ? 0 : res.body().size();
  beast::error_code ec;
  stream_.expires_after(transfer_deadline(s_.config, bytes_out));
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
// answer is not lost to a reset caused by unread request bytes.
asio::awaitable<void> Session::lingering_close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::milliseconds(500));
  std::array<char, 16384> sink;
  std::size_t drained = 0;
  while (!ec && drained < (1u << 20)) {
    drained += co_await stream_.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
  }
  stream_.close();
}

asio::awaitable<void> Session::run() {
  const ServerConfig& cfg = s_.config;
  for (;;) {
    http::request_parser<Body> parser;
    parser.header_limit(cfg.max_header_bytes);
    // Beast checks Content-Length against body_limit while parsing headers;
    // allow the largest any route takes and apply the route's own below.
    parser.body_limit(std::max(cfg.max_body_bytes, cfg.max_json_body_bytes));
    beast::error_code ec;
    idle_ = buffer_.size() == 0;
    if (s_.draining.load() && idle_) break;
    stream_.expires_after(std::chrono::milliseconds(cfg.read_timeout_ms));
    co_await http::async_read_header(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    idle_ = false;
    const auto started = Clock::now();
    Request req;
    req.peer = peer_;
    req.peer_loopback = loopback_;
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
    req.method = std::string(h.method_string());
    req.target = std::string(h.target());
    for (const auto& f : h) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace_back(std::move(name), std::string(f.value()));
    }
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
    if (has_body) {
      if (const std::string* expect = req.header("expect"); expect && beast::iequals(*expect, "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, version};
        stream_.expires_after(std::chrono::milliseconds(cfg.write_timeout_ms));
        co_await http::async_write(stream_, cont, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
      }
      stream_.expires_after(transfer_deadline(cfg, parser.content_length().value_or(limit)));
      co_await http::async_read(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == http::error::body_limit) {
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
    req.body = std::move(parser.get().body());
    const std::uint64_t bytes_in = req.body.size();
    stream_.expires_never();  // a waiting GET may take long; the socket is idle meanwhile
    Response r = co_await handle_request(s_, req, route);
    if (!co_await respond(r, req, version, head, keep_alive, started, bytes_in)) break;
  }
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

asio::awaitable<void> reject(beast::tcp_stream stream) {
  BeastResponse res{http::status::service_unavailable, 11};
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

void start_session(tcp::socket socket, Services& services, Connections& connections) {
  std::make_shared<Session>(std::move(socket), services, connections)->start();
}

void reject_connection(tcp::socket socket, Services& services) {
  services.metrics.connections_rejected.fetch_add(1, std::memory_order_relaxed);
  auto ex = socket.get_executor();
  asio::co_spawn(ex, reject(beast::tcp_stream(std::move(socket))), asio::detached);
}

}  // namespace kcache::server
