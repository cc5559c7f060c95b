#include "server/server.hpp"

#include "server/http/upload_spool.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <spdlog/spdlog.h>

#include "server/connections.hpp"
#include "server/http/connection_reject.hpp"
#include "server/http/http_session.hpp"
#include "server/leases/redis_replicas.hpp"
#include "server/resp/resp_session.hpp"
#include "server/resp/resp_tenants.hpp"
#include "server/services.hpp"
#include "server/http/tls_context.hpp"
#include "server/trusted_keys.hpp"

namespace kcache::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

unsigned io_threads(const ServerConfig& c) {
  if (c.threads) return c.threads;
  return std::max(2u, std::thread::hardware_concurrency());
}

unsigned pool_threads(const ServerConfig& c) {
  if (c.storage_threads) return c.storage_threads;
  return std::max(4u, 2 * io_threads(c));
}

tcp::endpoint resolve(asio::io_context& ioc, const std::string& host, std::uint16_t port) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (!ec) return {addr, port};
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) throw ConfigError("--listen: cannot resolve host '" + host + "'");
  return *results.begin();
}

// Descriptors the configured limits can need at once: a socket per HTTP and
// RESP connection, a spool file per upload being received (at most one per
// connection), and a margin for storage (files being read, Redis
// connections), the acceptors and logs. Raises the soft RLIMIT_NOFILE
// toward that (up to the hard limit), and says so plainly when it cannot:
// past the limit accept() fails with EMFILE and clients hang in the backlog.
void check_fd_limit(const ServerConfig& c, unsigned pool) {
  const std::uint64_t need = 2ull * c.max_connections + (c.resp_enabled ? c.resp_max_connections : 0) +
                             2ull * pool + 64;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? need : std::min<rlim_t>(rl.rlim_max, need);
    if (raised.rlim_cur > rl.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      spdlog::info("raised RLIMIT_NOFILE from {} to {} (the limits can need {} descriptors)",
                   static_cast<std::uint64_t>(rl.rlim_cur), static_cast<std::uint64_t>(raised.rlim_cur), need);
      rl = raised;
    }
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    spdlog::warn("RLIMIT_NOFILE is {} (hard limit {}), but --max-connections {}{} can need {} file descriptors: "
                 "past the limit new connections wait unanswered (accept: too many open files). Raise it "
                 "(ulimit -n, systemd LimitNOFILE=, docker --ulimit nofile=) or lower --max-connections",
                 static_cast<std::uint64_t>(rl.rlim_cur),
                 rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_max),
                 c.max_connections,
                 c.resp_enabled ? " and --resp-max-connections " + std::to_string(c.resp_max_connections) : "",
                 need);
  }
}

template <typename T>
T startup(Result<T> r) {
  if (!r) throw ConfigError(r.error().message);
  return std::move(*r);
}

}  // namespace

// Declaration order is destruction order reversed: the io_context (and with
// it every suspended session coroutine) goes before the pool and storage it
// refers to.
struct Server::Impl {
  ServerConfig config;
  std::unique_ptr<storage::Backend> backend;
  std::unique_ptr<LeaseTable> leases;
  Waiters waiters;
  std::unique_ptr<Landings> landings;  // after waiters: its subscriber thread notifies them
  std::unique_ptr<HotTier> hot;
  Metrics metrics;
  std::unique_ptr<Authorizer> authorizer;
  std::unique_ptr<TrustedKeys> trusted_keys;
  std::unique_ptr<Namespaces> namespaces;
  History history;
  std::unique_ptr<TlsContexts> tls;  // null: plain HTTP
  std::atomic<bool> draining{false};
  std::atomic<std::uint64_t> upload_bytes{0};  // request bodies held now
  Connections connections;
  asio::thread_pool pool;
  std::unique_ptr<Services> services;
  std::unique_ptr<asio::io_context> ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<resp::RespShared> resp_shared;  // null: no RESP endpoint
  std::unique_ptr<resp::RespTenants> resp_tenants;  // every namespace's RESP state (after resp_shared: it refers to it)
  std::unique_ptr<tcp::acceptor> resp_acceptor;
  std::unique_ptr<asio::signal_set> signals;
  std::unique_ptr<asio::signal_set> hangup;

  Impl(ServerConfig c, std::unique_ptr<storage::Backend> b)
      : config(std::move(c)),
        backend(std::move(b)),
        pool(pool_threads(config)),
        ioc(std::make_unique<asio::io_context>(static_cast<int>(io_threads(config)))) {
    const bool shared_redis =
        config.storage.rfind("redis://", 0) == 0 || config.storage.rfind("redis-cluster://", 0) == 0;
    if (shared_redis) {
      // Replicas: leases and landings go through the same Redis (or Cluster) as storage.
      auto parts = make_redis_replica_parts(config.storage, config.lease_ttl_ms, config.max_leases, waiters);
      if (!parts) throw std::runtime_error("cannot open the Redis lease table: " + parts.error().message);
      leases = std::move(parts->leases);
      landings = std::move(parts->landings);
    } else {
      leases = make_in_process_lease_table(config.lease_ttl_ms, config.max_leases);
      landings = make_local_landings(waiters);
    }
    {
      const std::uint64_t budget = shared_redis ? 0 : config.hot_cache_bytes;
      hot = std::make_unique<HotTier>(budget, std::min<std::uint64_t>(16ull << 20, budget / 8));
    }
    if (!config.tls_cert.empty()) {
      tls = startup(TlsContexts::load({config.tls_client_ca, config.tls_cert, config.tls_key}));
    }
    authorizer = startup(make_authorizer({config.tokens_file, config.anonymous_read, config.insecure_allow_remote,
                                          tls && tls->requires_client_certs(), config.namespaces_file}));
    trusted_keys = startup(TrustedKeys::load(config.trusted_keys));
    namespaces = startup(Namespaces::open(config.storage, *backend, config.namespaces_file, config.require_signed,
                                          config.trusted_keys));
    if (config.upload_spool_dir.empty()) config.upload_spool_dir = default_spool_dir(config.storage);
    if (auto s = check_spool_dir(config.upload_spool_dir); !s) {
      // A full disk is a state, not a misconfiguration: the server starts and
      // serves reads; spooled uploads are refused 507 until there is room.
      if (s.error().code != Errc::full) throw ConfigError("--upload-spool-dir: " + s.error().message);
      spdlog::warn("--upload-spool-dir {}: {}; starting anyway: uploads over --upload-spool-threshold are "
                   "refused (507) until it has room", config.upload_spool_dir, s.error().message);
    }
    check_fd_limit(config, pool_threads(config));
    services = std::make_unique<Services>(Services{config, *backend, *namespaces, history, *leases, waiters, *landings, *hot, metrics, *authorizer,
                                                   *trusted_keys, pool, draining,
                                                   [this] { return http_connections(); }, upload_bytes});
    auto ep = resolve(*ioc, config.listen_host, config.listen_port);
    const bool authenticated = authorizer->token_count() > 0 || (tls && tls->requires_client_certs());
    if (!ep.address().is_loopback() && !authenticated && !config.insecure_allow_remote) {
      throw ConfigError("refusing to listen on non-loopback address " + ep.address().to_string() +
                        " without authentication (--tokens, or --tls-client-ca); pass --insecure-allow-remote "
                        "to force it");
    }
    if (!ep.address().is_loopback() && authorizer->token_count() > 0 && !tls) {
      spdlog::warn("bearer tokens on a non-loopback address without TLS: anyone on the path can read them");
    }
    acceptor = open_acceptor(ep, config.listen_host, config.listen_port);
    if (config.resp_enabled) {
      auto rep = resolve(*ioc, config.resp_listen_host, config.resp_listen_port);
      // RESP is plain TCP: no client certificate, so only tokens authenticate it.
      if (authorizer->token_count() == 0 && tls && tls->requires_client_certs()) {
        throw ConfigError("refusing the RESP endpoint: HTTP authenticates clients by certificate "
                          "(--tls-client-ca), which RESP cannot check; give --tokens (RESP clients then AUTH)");
      }
      if (!rep.address().is_loopback() && authorizer->token_count() == 0 && !config.insecure_allow_remote) {
        throw ConfigError("refusing the RESP endpoint on non-loopback address " + rep.address().to_string() +
                          " without --tokens; pass --insecure-allow-remote to force it");
      }
      resp_shared = std::make_unique<resp::RespShared>(
          *services, make_in_process_lease_table(std::max<std::uint64_t>(config.resp_flight_window_ms, 100),
                                                 config.max_leases));
      resp_shared->limits.max_bulk_bytes = std::min(config.resp_max_value_bytes, config.max_body_bytes);
      resp_shared->expiries.set_limit(config.resp_max_expiries);
      // The other namespaces' RESP state, made on a connection's first command there.
      resp_tenants = std::make_unique<resp::RespTenants>(*resp_shared, [this] {
        return make_in_process_lease_table(std::max<std::uint64_t>(config.resp_flight_window_ms, 100),
                                           config.max_leases);
      });
      resp_acceptor = open_acceptor(rep, config.resp_listen_host, config.resp_listen_port);
    }
  }

  std::unique_ptr<tcp::acceptor> open_acceptor(const tcp::endpoint& ep, const std::string& host, std::uint16_t port) {
    auto a = std::make_unique<tcp::acceptor>(*ioc);
    boost::system::error_code ec;
    a->open(ep.protocol(), ec);
    if (!ec) a->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) a->bind(ep, ec);
    if (!ec) a->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw ConfigError("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
    return a;
  }

  // Accepts on `a` until the drain closes it; `serve(socket, over_limit)`
  // takes each connection (over_limit: --max-connections is reached).
  template <typename Full, typename Serve>
  asio::awaitable<void> accept_loop(tcp::acceptor& a, const char* what, Full full, Serve serve) {
    for (;;) {
      boost::system::error_code ec;
      // A strand per connection; named, not a temporary of the co_await
      // expression (g++ 12 destroys those twice).
      auto strand = asio::make_strand(*ioc);
      tcp::socket socket = co_await a.async_accept(strand, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (draining.load() || ec == asio::error::operation_aborted) co_return;
        // EMFILE and friends: back off briefly instead of spinning.
        spdlog::warn("{} accept failed: {}", what, ec.message());
        auto ex = co_await asio::this_coro::executor;
        asio::steady_timer t(ex, std::chrono::milliseconds(50));
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      boost::system::error_code opt_ec;
      socket.set_option(tcp::no_delay(true), opt_ec);
      metrics.connections_accepted.fetch_add(1, std::memory_order_relaxed);
      serve(std::move(socket), full());
    }
  }

  // Open HTTP connections: the registry holds RESP's too, which have a budget of their own.
  std::uint64_t http_connections() const {
    const std::uint64_t all = connections.count();
    const std::uint64_t resp = resp_shared ? resp_shared->open.load() : 0;
    return all > resp ? all - resp : 0;
  }

  void serve_http(tcp::socket socket, bool over_limit) {
    if (!over_limit) {
      start_session(std::move(socket), *services, connections, tls ? tls->current() : nullptr);
    } else if (tls) {
      // A plain-text 503 would be noise to a TLS client; close instead.
      metrics.connections_rejected.fetch_add(1, std::memory_order_relaxed);
      boost::system::error_code ec;
      socket.close(ec);
    } else {
      reject_connection(std::move(socket), *services);
    }
  }

  void serve_resp(tcp::socket socket, bool over_limit) {
    if (!over_limit) {
      resp::start_resp_session(std::move(socket), *resp_shared, connections);
      return;
    }
    metrics.connections_rejected.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code ec;
    socket.close(ec);
  }

  // Counts leases that ran out even when nobody asks about them.
  asio::awaitable<void> sweep_loop() {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    while (!draining.load()) {
      t.expires_after(std::chrono::seconds(1));
      boost::system::error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      auto sweep_job = [this] {
        leases->sweep();
        if (resp_tenants) {
          resp_tenants->each([](resp::RespShared& t) {
            t.flights->sweep();
            // RESP keys whose expiry passed go from storage too, read or not.
            for (const auto& skey : t.expiries.due(10'000)) {
              if (!t.expiries.expired(skey)) continue;  // set again meanwhile
              (void)t.s.backend.remove(skey);
              t.expiries.clear(skey);
            }
          });
        }
        return true;
      };
      co_await run_blocking(pool, sweep_job);
    }
  }

  // SIGHUP: re-read tokens, certificates and trusted keys on the blocking
  // pool (file I/O), each independently; whatever fails keeps its old
  // version. Open connections are untouched.
  void wait_hangup() {
    hangup->async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      asio::post(pool, [this] { reload(); });
      wait_hangup();
    });
  }

  void reload() {
    auto report = [](const char* what, const Status& st) {
      if (st) spdlog::info("SIGHUP: reloaded {}", what);
      else spdlog::error("SIGHUP: {} not reloaded, keeping the old ones: {}", what, st.error().message);
    };
    if (!config.tokens_file.empty() || !config.namespaces_file.empty()) report("tokens", authorizer->reload());
    // The namespaces hold the trusted keys too (the server's, and each namespace's own).
    if (!config.namespaces_file.empty() || !config.trusted_keys.empty()) report("namespaces", namespaces->reload());
    if (tls) report("TLS certificates", tls->reload());
    if (!config.trusted_keys.empty()) report("trusted keys", trusted_keys->reload());
    spdlog::info("SIGHUP: reload done");
  }

  void begin_drain() {
    if (draining.exchange(true)) return;
    spdlog::info("draining: {} connection(s) open", connections.count());
    asio::post(*ioc, [this] {
      boost::system::error_code ec;
      acceptor->close(ec);
      if (resp_acceptor) resp_acceptor->close(ec);
    });
    waiters.notify_all();
    connections.close_idle();
    asio::co_spawn(*ioc, drain_loop(), asio::detached);
  }

  asio::awaitable<void> drain_loop() {
    auto deadline = Clock::now() + std::chrono::milliseconds(config.drain_timeout_ms);
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    while (connections.count() > 0 && Clock::now() < deadline) {
      t.expires_after(std::chrono::milliseconds(20));
      boost::system::error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      connections.close_idle();
    }
    if (connections.count() > 0) spdlog::warn("drain timeout: closing {} connection(s)", connections.count());
    ioc->stop();
  }
};

Server::Server(ServerConfig config, std::unique_ptr<storage::Backend> backend)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(backend))) {}

Server::~Server() {
  if (!impl_) return;
  // Pool jobs may still hand results to the io_context: finish them first,
  // then drop the io_context with every coroutine frame it holds.
  impl_->pool.join();
  impl_->landings.reset();  // stops the subscriber thread before the executors it posts to go
  impl_->signals.reset();
  impl_->hangup.reset();
  impl_->acceptor.reset();
  impl_->resp_acceptor.reset();
  impl_->ioc.reset();
}

std::uint16_t Server::port() const {
  boost::system::error_code ec;
  return impl_->acceptor->local_endpoint(ec).port();
}

void Server::stop() { impl_->begin_drain(); }

int Server::run() {
  auto& im = *impl_;
  // Signals first, so a SIGHUP sent as soon as the port is announced never
  // meets the default action (terminate).
  im.signals = std::make_unique<asio::signal_set>(*im.ioc, SIGINT, SIGTERM);
  im.signals->async_wait([&im](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    im.begin_drain();
  });
  im.hangup = std::make_unique<asio::signal_set>(*im.ioc, SIGHUP);
  im.wait_hangup();
  auto ep = im.acceptor->local_endpoint();
  std::string host = ep.address().to_string();
  if (ep.address().is_v6()) host = "[" + host + "]";
  std::printf("listening on %s:%u\n", host.c_str(), static_cast<unsigned>(ep.port()));
  if (im.resp_acceptor) {
    auto rep = im.resp_acceptor->local_endpoint();
    std::string rhost = rep.address().to_string();
    if (rep.address().is_v6()) rhost = "[" + rhost + "]";
    std::printf("resp listening on %s:%u\n", rhost.c_str(), static_cast<unsigned>(rep.port()));
    spdlog::info("RESP endpoint on {}:{} (single-flight window {} ms)", rhost, rep.port(), im.config.resp_flight_window_ms);
  }
  std::fflush(stdout);
  spdlog::info("kcache-server listening on {}:{} ({}) storage={} io_threads={} storage_threads={} lease_ttl_ms={} "
               "auth={} signed_uploads={} upload_spool={} (above {} bytes)",
               host, ep.port(), im.tls ? (im.tls->requires_client_certs() ? "https+mtls" : "https") : "http",
               im.backend->name(), io_threads(im.config), pool_threads(im.config), im.config.lease_ttl_ms,
               im.authorizer->token_count() == 0 ? "loopback" : std::to_string(im.authorizer->token_count()) + " tokens",
               im.config.require_signed ? "required" : (im.config.trusted_keys.empty() ? "unchecked" : "verified if signed"),
               im.config.upload_spool_dir, im.config.upload_spool_threshold);
  asio::co_spawn(*im.ioc,
                 im.accept_loop(
                     *im.acceptor, "HTTP", [&im] { return im.http_connections() >= im.config.max_connections; },
                     [&im](tcp::socket s, bool over) { im.serve_http(std::move(s), over); }),
                 asio::detached);
  if (im.resp_acceptor) {
    asio::co_spawn(*im.ioc,
                   im.accept_loop(
                       *im.resp_acceptor, "RESP",
                       [&im] { return im.resp_shared->open.load() >= im.config.resp_max_connections; },
                       [&im](tcp::socket s, bool over) { im.serve_resp(std::move(s), over); }),
                   asio::detached);
  }
  asio::co_spawn(*im.ioc, im.sweep_loop(), asio::detached);

  std::vector<std::thread> threads;
  const unsigned n = io_threads(im.config);
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([&im] { im.ioc->run(); });
  im.ioc->run();
  for (auto& t : threads) t.join();
  spdlog::info("stopped");
  return 0;
}

}  // namespace kcache::server
