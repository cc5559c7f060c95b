// The client's transport against a tiny in-process HTTP server: keep-alive
// reuse, retries, deadlines, the breaker, fail-open and fork safety.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "artifact/bundle.hpp"
#include "client/client.hpp"
#include "client/http_client.hpp"
#include "client/server_api.hpp"
#include "common/hex.hpp"

namespace kcache {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// One request as the fake server saw it.
struct SeenRequest {
  std::string method;
  std::string target;
  std::string head;  // request line and headers
  std::string body;
};

// A scripted HTTP/1.1 server on 127.0.0.1:<random>. The handler returns the
// raw response bytes, or nullopt to never answer. Keep-alive is honoured
// unless the handler's response says "Connection: close" (then it closes).
class FakeServer {
 public:
  using Handler = std::function<std::optional<std::string>(const SeenRequest&)>;

  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listen_fd_, 64), 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> g(mu_);
      for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
    ::close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }

  static std::string response(int status, const std::string& body = "",
                              const std::string& extra = "") {
    return "HTTP/1.1 " + std::to_string(status) +
           " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
  }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      if (stop_) {
        ::close(fd);
        return;
      }
      connections_.fetch_add(1);
      std::lock_guard<std::mutex> g(mu_);
      conns_.push_back(fd);
      workers_.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    std::string buf;
    char chunk[65536];
    for (;;) {
      std::size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buf.append(chunk, static_cast<std::size_t>(n));
      }
      SeenRequest r;
      r.head = buf.substr(0, end);
      buf.erase(0, end + 4);
      r.method = r.head.substr(0, r.head.find(' '));
      auto sp = r.head.find(' ') + 1;
      r.target = r.head.substr(sp, r.head.find(' ', sp) - sp);
      std::size_t length = 0;
      auto cl = r.head.find("Content-Length: ");
      if (cl != std::string::npos) length = std::stoul(r.head.substr(cl + 16));
      while (buf.size() < length) {
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buf.append(chunk, static_cast<std::size_t>(n));
      }
      r.body = buf.substr(0, length);
      buf.erase(0, length);
      requests_.fetch_add(1);
      auto answer = handler_(r);
      if (!answer) {
        pollfd p{fd, POLLIN, 0};
        while (!stop_) ::poll(&p, 1, 50);  // never answer
        return;
      }
      ::send(fd, answer->data(), answer->size(), MSG_NOSIGNAL);
      if (answer->find("Connection: close") != std::string::npos) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0}, connections_{0};
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

std::string random_key() {
  static std::mt19937_64 rng{std::random_device{}()};
  std::vector<std::uint8_t> b(32);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return to_hex(b);
}

std::vector<std::uint8_t> make_bundle(const std::string& key) {
  nlohmann::json m = {{"key", key}, {"label", "T/cpu/f32/default/train"}, {"compile_seconds", 1.0}};
  return *artifact::write_bundle(m, {{"mega_cache", std::vector<std::uint8_t>(100, 7)}});
}

// A loopback port nothing listens on.
int dead_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::unique_ptr<client::HttpClient> http_to(const std::string& url, int request_ms = 2000) {
  client::Timeouts t;
  t.connect_ms = 1000;
  t.request_ms = request_ms;
  auto h = client::HttpClient::create(*client::Url::parse(url), {}, t);
  EXPECT_TRUE(h.ok());
  return std::move(h).value();
}

std::unique_ptr<client::ServerApi> api_to(const std::string& url, int retries, int threshold = 100,
                                          int request_ms = 2000) {
  return std::make_unique<client::ServerApi>(
      http_to(url, request_ms), client::RetryPolicy{retries, 10, 100},
      std::make_shared<client::CircuitBreaker>(threshold, 60000), "tok", "test");
}

ClientConfig config_for(const std::string& url) {
  ClientConfig c;
  c.url = url;
  c.node_tier = false;
  c.miss_log = "none";
  c.log_level = "off";
  c.connect_timeout_ms = 500;
  c.request_timeout_ms = 500;
  c.retry_base_ms = 10;
  return c;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(Transport, KeepAliveReusesOneConnection) {
  FakeServer server([](const SeenRequest&) { return FakeServer::response(404, "{}"); });
  auto http = http_to(server.url());
  for (int i = 0; i < 5; ++i) {
    auto r = http->send({"GET", "/v1/artifacts/x", {}, {}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 404);
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(http->connections_opened(), 1u);
  EXPECT_EQ(http->pool_size(), 1u);
}

TEST(Transport, AConnectionTheServerClosedIsReplaced) {
  FakeServer server(
      [](const SeenRequest&) { return FakeServer::response(200, "ok", "Connection: close\r\n"); });
  auto http = http_to(server.url());
  for (int i = 0; i < 3; ++i) {
    auto r = http->send({"GET", "/healthz", {}, {}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(std::string(r->body.begin(), r->body.end()), "ok");
  }
  EXPECT_EQ(server.connections(), 3);
}

TEST(Transport, SendsTokenAndLeaseHeaders) {
  std::mutex mu;
  std::vector<SeenRequest> seen;
  FakeServer server([&](const SeenRequest& r) {
    std::lock_guard<std::mutex> g(mu);
    seen.push_back(r);
    return FakeServer::response(204);
  });
  auto api = api_to(server.url(), 0);
  ASSERT_TRUE(api->release(std::string(64, 'a'), "lease-token").ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "DELETE");
  EXPECT_EQ(seen[0].target, "/v1/leases/" + std::string(64, 'a'));
  EXPECT_NE(seen[0].head.find("Authorization: Bearer tok"), std::string::npos);
  EXPECT_NE(seen[0].head.find("X-Kcache-Lease: lease-token"), std::string::npos);
}

TEST(Retry, IdempotentGetIsRetriedOn503) {
  std::atomic<int> n{0};
  FakeServer server([&](const SeenRequest&) {
    return n.fetch_add(1) < 2 ? FakeServer::response(503, "{\"error\":\"storage_unavailable\"}")
                              : FakeServer::response(404, "{}");
  });
  auto api = api_to(server.url(), 2);
  auto r = api->get(random_key());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(server.requests(), 3);
}

TEST(Retry, GivesUpAfterTheConfiguredRetries) {
  FakeServer server([&](const SeenRequest&) { return FakeServer::response(503); });
  auto api = api_to(server.url(), 2);
  auto r = api->get(random_key());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(server.requests(), 3);
}

TEST(Retry, LeaseAcquireIsNotRetried) {
  FakeServer server([&](const SeenRequest&) { return FakeServer::response(503); });
  auto api = api_to(server.url(), 2);
  EXPECT_FALSE(api->acquire(random_key()).ok());
  EXPECT_EQ(server.requests(), 1);
}

TEST(Retry, RefusedConnectionsAreRetriedQuickly) {
  auto api = api_to("http://127.0.0.1:" + std::to_string(dead_port()), 2);
  auto t0 = Clock::now();
  auto r = api->get(random_key());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  // Generous bounds only (a loaded machine or a sanitizer build is slow);
  // they tell "retried quickly" from "waited for a deadline or hung".
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(Deadlines, AServerThatNeverAnswersTimesOutOnceWithoutRetry) {
  FakeServer server([&](const SeenRequest&) { return std::nullopt; });
  auto api = api_to(server.url(), 2, 100, 300);
  auto t0 = Clock::now();
  auto r = api->get(random_key());
  double took = seconds_since(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::timeout);
  EXPECT_GE(took, 0.29);  // a deadline never fires early
  EXPECT_LT(took, 10.0);
  EXPECT_EQ(server.requests(), 1);  // once: no retry after a timeout
}

TEST(Deadlines, ALongPollGetsItsWaitOnTopOfTheRequestDeadline) {
  FakeServer server([&](const SeenRequest& r) -> std::optional<std::string> {
    if (r.target.find("wait_ms=") == std::string::npos) return FakeServer::response(404, "{}");
    std::this_thread::sleep_for(600ms);  // longer than request_ms, shorter than the wait
    return FakeServer::response(404, "{}");
  });
  auto api = api_to(server.url(), 0, 100, 300);
  auto r = api->get(random_key(), 1000);
  ASSERT_TRUE(r.ok()) << r.error().message;
}

TEST(Breaker, OpensAndThenSkipsTheServer) {
  FakeServer server([&](const SeenRequest&) {
    return FakeServer::response(500, "{\"error\":\"storage_error\"}");
  });
  auto api = api_to(server.url(), 0, 3);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(api->get(random_key()).ok());
  EXPECT_EQ(server.requests(), 3);
  auto r = api->get(random_key());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("breaker"), std::string::npos);
  EXPECT_EQ(server.requests(), 3);  // not contacted
}

TEST(FailOpen, ServerDownMeansALocalCompileFast) {
  auto c = Client::create(config_for("http://127.0.0.1:" + std::to_string(dead_port())));
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto key = random_key();
  auto t0 = Clock::now();
  auto r = (*c)->get_or_compile(
      key, [&] { return Result<std::vector<std::uint8_t>>(make_bundle(key)); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->source, Source::local);
  EXPECT_LT(seconds_since(t0), 10.0);
  auto s = (*c)->stats();
  EXPECT_EQ(s.local_compiles, 1u);
  EXPECT_EQ(s.server_errors, 1u);
  EXPECT_EQ(s.breaker, "open");  // three refused attempts
  t0 = Clock::now();
  auto again = (*c)->get_or_compile(random_key(), [&] {
    return Result<std::vector<std::uint8_t>>(make_error(Errc::internal, "x"));
  });
  EXPECT_FALSE(again.ok());
  // The breaker stays open: the server is skipped, not retried.
  EXPECT_EQ((*c)->stats().breaker, "open");
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(FailOpen, A500MeansALocalCompile) {
  FakeServer server([&](const SeenRequest&) {
    return FakeServer::response(500, "{\"error\":\"storage_error\"}");
  });
  auto c = Client::create(config_for(server.url()));
  ASSERT_TRUE(c.ok());
  auto key = random_key();
  auto r = (*c)->get_or_compile(
      key, [&] { return Result<std::vector<std::uint8_t>>(make_bundle(key)); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, Source::local);
  auto g = (*c)->get(random_key());
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
  auto p = (*c)->put(key, make_bundle(key));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(*p);  // counted, not raised
  EXPECT_EQ((*c)->stats().upload_failures, 1u);
}

TEST(FailOpen, AHungServerCostsOneRequestDeadline) {
  FakeServer server([&](const SeenRequest&) { return std::nullopt; });
  auto c = Client::create(config_for(server.url()));
  ASSERT_TRUE(c.ok());
  auto key = random_key();
  auto t0 = Clock::now();
  auto r = (*c)->get_or_compile(
      key, [&] { return Result<std::vector<std::uint8_t>>(make_bundle(key)); });
  double took = seconds_since(t0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, Source::local);
  EXPECT_GE(took, 0.49);  // it did wait for the request deadline (500 ms), once
  EXPECT_LT(took, 10.0);
}

TEST(FailOpen, ACorruptServedBundleIsRefusedAndCompiledLocally) {
  std::string key = random_key();
  auto good = make_bundle(key);
  std::string bad(good.begin(), good.end());
  bad[bad.size() / 2] ^= 0x20;
  FakeServer server([&](const SeenRequest& r) -> std::optional<std::string> {
    if (r.method == "GET") return FakeServer::response(200, bad);
    return FakeServer::response(500);
  });
  auto c = Client::create(config_for(server.url()));
  ASSERT_TRUE(c.ok());
  auto r = (*c)->get_or_compile(key, [&] { return Result<std::vector<std::uint8_t>>(good); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, Source::local);
  EXPECT_EQ(r->bundle, good);
  EXPECT_EQ((*c)->stats().refused, 1u);
}

TEST(Fork, TheChildNeverReusesTheParentsConnection) {
  FakeServer server([](const SeenRequest&) { return FakeServer::response(404, "{}"); });
  auto http = http_to(server.url());
  ASSERT_TRUE(http->send({"GET", "/a", {}, {}}).ok());
  ASSERT_EQ(http->pool_size(), 1u);
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: the inherited pool is abandoned, a fresh connection is made.
    bool ok = http->pool_size() == 0;
    auto r = http->send({"GET", "/child", {}, {}});
    ok = ok && r.ok() && r->status == 404;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The parent's pooled connection is intact and reused.
  auto r = http->send({"GET", "/parent", {}, {}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(http->connections_opened(), 1u);
  EXPECT_EQ(server.connections(), 2);  // the parent's and the child's
}

}  // namespace
}  // namespace kcache
