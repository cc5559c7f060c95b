#include "client/http_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <set>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "client/connection.hpp"

namespace kcache::client {

namespace http = boost::beast::http;
namespace net = boost::asio;
using boost::system::error_code;

namespace {

SteadyTime after_ms(std::uint64_t ms) {
  return std::chrono::steady_clock::now() +
         std::chrono::milliseconds(std::min<std::uint64_t>(ms, 1ull << 40));
}

std::uint64_t transfer_ms(std::uint64_t bytes, std::uint64_t rate) {
  if (rate == 0) return 0;
  return bytes * 1000 / rate;
}

// A SyncReadStream / SyncWriteStream over a Connection with one deadline.
class DeadlineStream {
 public:
  DeadlineStream(Connection& c, SteadyTime deadline) : c_(c), deadline_(deadline) {}
  void set_deadline(SteadyTime d) { deadline_ = d; }

  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, error_code& ec) {
    for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
         ++it) {
      net::mutable_buffer b = *it;
      if (b.size() > 0) return c_.read_some(b.data(), b.size(), deadline_, ec);
    }
    ec = {};
    return 0;
  }
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    error_code ec;
    std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, error_code& ec) {
    for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
         ++it) {
      net::const_buffer b = *it;
      if (b.size() > 0) return c_.write_some(b.data(), b.size(), deadline_, ec);
    }
    ec = {};
    return 0;
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    error_code ec;
    std::size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  Connection& c_;
  SteadyTime deadline_;
};

struct Pooled {
  std::unique_ptr<Connection> conn;
  boost::beast::flat_buffer buffer;
};

// Every live pool, so that fork() never happens while a pool's mutex is held
// (pthread_atfork locks them all around the fork).
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::set<HttpClient::Impl*>& registry() {
  static std::set<HttpClient::Impl*> s;
  return s;
}

Error transport_error(const error_code& ec, const std::string& what) {
  if (ec == net::error::timed_out) return make_error(Errc::timeout, what + ": deadline passed");
  if (ec == http::error::body_limit)
    return make_error(Errc::too_large, what + ": response body over the limit");
  return make_error(Errc::unavailable, what + ": " + ec.message());
}

}  // namespace

struct HttpClient::Impl {
  Url url;
  Timeouts timeouts;
  SSL_CTX* ctx = nullptr;
  std::mutex mu;
  std::vector<std::unique_ptr<Pooled>> idle;  // GUARDED_BY(mu)
  pid_t pid = ::getpid();                     // GUARDED_BY(mu)
  std::atomic<std::uint64_t> opened{0};
  static constexpr std::size_t k_max_idle = 16;

  ~Impl() {
    {
      std::lock_guard<std::mutex> g(registry_mutex());
      registry().erase(this);
    }
    idle.clear();
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }

  // REQUIRES: mu held. After fork, the parent's connections are closed
  // without any I/O and never reused.
  void check_pid_locked() {
    pid_t now = ::getpid();
    if (now != pid) {
      idle.clear();
      pid = now;
    }
  }

  std::unique_ptr<Pooled> take() {
    std::lock_guard<std::mutex> g(mu);
    check_pid_locked();
    while (!idle.empty()) {
      auto p = std::move(idle.back());
      idle.pop_back();
      if (p->conn->idle_usable() && p->buffer.size() == 0) return p;
    }
    return nullptr;
  }

  void give_back(std::unique_ptr<Pooled> p) {
    std::lock_guard<std::mutex> g(mu);
    check_pid_locked();
    if (p->conn->owner_pid() != pid || idle.size() >= k_max_idle) return;
    idle.push_back(std::move(p));
  }

  Result<std::unique_ptr<Pooled>> connect() {
    auto c = Connection::open(url.host, url.port, ctx,
                              after_ms(static_cast<std::uint64_t>(timeouts.connect_ms)));
    if (!c.ok()) return c.error();
    opened.fetch_add(1);
    auto p = std::make_unique<Pooled>();
    p->conn = std::move(c).value();
    return p;
  }

  Result<HttpResponse> exchange(Pooled& p, const HttpRequest& request, int extra_ms,
                                bool& reusable);
};

Result<HttpResponse> HttpClient::Impl::exchange(Pooled& p, const HttpRequest& request, int extra_ms,
                                                bool& reusable) {
  reusable = false;
  http::request<http::vector_body<std::uint8_t>> req;
  req.method(http::string_to_verb(request.method));
  req.target(url.prefix + request.target);
  req.version(11);
  req.set(http::field::host, url.host_header());
  req.set(http::field::user_agent, "kcache-client/0.1");
  for (const auto& [name, value] : request.headers) req.set(name, value);
  req.body() = request.body;
  req.keep_alive(true);
  req.prepare_payload();
  std::uint64_t base = static_cast<std::uint64_t>(timeouts.request_ms);
  DeadlineStream stream(*p.conn,
                        after_ms(base + transfer_ms(request.body.size(), timeouts.min_rate)));
  error_code ec;
  http::write(stream, req, ec);
  if (ec) return transport_error(ec, request.method + " " + request.target + " (sending)");

  stream.set_deadline(after_ms(base + static_cast<std::uint64_t>(std::max(extra_ms, 0))));
  http::response_parser<http::vector_body<std::uint8_t>> parser;
  parser.body_limit(timeouts.max_body);
  parser.header_limit(64 * 1024);
  if (request.method == "HEAD") parser.skip(true);
  http::read_header(stream, p.buffer, parser, ec);
  if (ec)
    return transport_error(ec, request.method + " " + request.target + " (waiting for the answer)");
  std::uint64_t declared = parser.content_length().value_or(0);
  if (declared > timeouts.max_body)
    return make_error(Errc::too_large, "response body over the limit");
  stream.set_deadline(after_ms(base + transfer_ms(declared, timeouts.min_rate)));
  if (!parser.is_done()) http::read(stream, p.buffer, parser, ec);
  if (ec) return transport_error(ec, request.method + " " + request.target + " (reading the body)");

  auto res = parser.release();
  HttpResponse out;
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    out.headers[name] = std::string(field.value());
  }
  out.body = std::move(res.body());
  reusable = res.keep_alive();
  return out;
}

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

namespace {

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(
        [] {
          registry_mutex().lock();
          for (auto* impl : registry()) impl->mu.lock();
        },
        [] {
          for (auto* impl : registry()) impl->mu.unlock();
          registry_mutex().unlock();
        },
        [] {
          // The child drops the pools lazily (pid check); here it only
          // releases the locks the forking thread took.
          for (auto* impl : registry()) impl->mu.unlock();
          registry_mutex().unlock();
        });
  });
}

Result<SSL_CTX*> make_tls_context(const TlsFiles& tls) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return make_error(Errc::internal, "SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (auto s = load_tls_files(ctx, tls, {"KCACHE_CA_FILE", "KCACHE_CLIENT_CERT", "KCACHE_CLIENT_KEY"},
                              /*system_ca_by_default=*/true);
      !s) {
    SSL_CTX_free(ctx);
    return s.error();
  }
  return ctx;
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::create(Url url, TlsFiles tls, Timeouts timeouts) {
  auto impl = std::make_unique<Impl>();
  impl->url = std::move(url);
  impl->timeouts = timeouts;
  if (impl->url.tls) {
    auto ctx = make_tls_context(tls);
    if (!ctx.ok()) return ctx.error();
    impl->ctx = *ctx;
  }
  install_fork_handlers();
  {
    std::lock_guard<std::mutex> g(registry_mutex());
    registry().insert(impl.get());
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::send(const HttpRequest& request, int extra_ms) {
  // A pooled connection the server closed while idle fails before any answer
  // byte; such a failure is retried once on a fresh connection.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Pooled> p = attempt == 0 ? impl_->take() : nullptr;
    bool reused = p != nullptr;
    if (!p) {
      auto fresh = impl_->connect();
      if (!fresh.ok()) return fresh.error();
      p = std::move(fresh).value();
    }
    bool reusable = false;
    auto r = impl_->exchange(*p, request, extra_ms, reusable);
    if (r.ok()) {
      if (reusable) impl_->give_back(std::move(p));
      return r;
    }
    if (!reused || r.error().code != Errc::unavailable) return r;
  }
  return make_error(Errc::unavailable, "unreachable");
}

void HttpClient::drop_pool() {
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->idle.clear();
}

std::size_t HttpClient::pool_size() {
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->check_pid_locked();
  return impl_->idle.size();
}

std::uint64_t HttpClient::connections_opened() const {
  return impl_->opened.load();
}

}  // namespace kcache::client
