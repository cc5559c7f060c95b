#include "server/resp/resp_session.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <spdlog/spdlog.h>

#include "server/resp/resp_command_support.hpp"
#include "server/resp/resp_reads.hpp"
#include "server/resp/resp_tenants.hpp"
#include "server/wait_watch.hpp"

namespace kcache::server::resp {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

class Session final : public SessionHandle, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, RespShared& sh, Connections& connections)
      : stream_(std::move(socket)), sh_(sh), connections_(connections) {
    boost::system::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      conn_.peer = ep.address().to_string() + ":" + std::to_string(ep.port());
      conn_.loopback = ep.address().is_loopback() ||
                       (ep.address().is_v6() && ep.address().to_v6().is_v4_mapped() &&
                        asio::ip::make_address_v4(asio::ip::v4_mapped, ep.address().to_v6()).is_loopback());
    }
    conn_.id = ++sh_.next_client_id;
    sh_.open.fetch_add(1);
  }

  ~Session() override {
    sh_.open.fetch_sub(1);
    if (id_) connections_.remove(id_);
  }

  void start() {
    id_ = connections_.add(shared_from_this());
    conn_.watch_client = [this] { return watch_client(); };
    asio::co_spawn(stream_.get_executor(), [self = shared_from_this()] { return self->run(); }, asio::detached);
  }

  void close_if_idle() override {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->stream_.socket().cancel();
    });
  }

 private:
  asio::awaitable<void> run() {
    try {
      co_await serve();
    } catch (const std::exception& e) {
      spdlog::warn("RESP {}: {}", conn_.peer, e.what());
    }
    if (!conn_.flights.empty()) {
      // The compiler went away without a SET: let its waiters go now.
      auto self = shared_from_this();
      auto job = [self] {
        release_flights(self->flights_in_ ? *self->flights_in_ : self->sh_, self->conn_);
        return true;
      };
      co_await run_blocking(sh_.s.pool, job);
    }
    boost::system::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  // What this connection may send: the full limits once it may write,
  // small commands before (as Redis does before AUTH).
  const Limits& limits() {
    RespShared* t = tenant();
    if (t && may(*t, conn_, Role::write)) return sh_.limits;
    if (t && may(*t, conn_, Role::read)) return read_limits_;
    return anonymous_limits_;
  }

  // The RespShared of the namespace this connection's credentials act in
  // (server/resp/resp_tenants.hpp); nullptr when that namespace is gone.
  RespShared* tenant() { return sh_.tenants ? sh_.tenants->for_ns(namespace_of(sh_, conn_)) : &sh_; }

  // No command in progress: the idle timeout (a drain may close it). A
  // command in progress: one deadline from its first byte, stretched only
  // by the bytes it has declared at --min-transfer-rate; trickling bytes
  // never re-arm it.
  // Before the connection has authenticated, neither may run past the
  // authentication deadline (--resp-auth-timeout-ms from the connect).
  void arm_deadline(const Parser& parser) {
    const auto& cfg = sh_.s.config;
    using clock = std::chrono::steady_clock;
    std::optional<clock::time_point> at;
    idle_ = parser.pending() == 0;
    if (idle_) {
      command_started_.reset();
      if (cfg.resp_idle_timeout_ms != 0) at = clock::now() + std::chrono::milliseconds(cfg.resp_idle_timeout_ms);
    } else {
      if (!command_started_) command_started_ = clock::now();
      at = *command_started_ + std::chrono::milliseconds(cfg.read_timeout_ms) +
           std::chrono::seconds(parser.declared() / cfg.min_transfer_rate);
    }
    if (const auto auth = auth_deadline(); auth && (!at || *auth < *at)) at = auth;
    if (at) stream_.expires_at(*at);
    else stream_.expires_never();
  }

  // When this connection must have authenticated by; none once it may read
  // (or when the deadline is off).
  std::optional<std::chrono::steady_clock::time_point> auth_deadline() {
    const auto ms = sh_.s.config.resp_auth_timeout_ms;
    RespShared* t = tenant();
    if (ms == 0 || (t && may(*t, conn_, Role::read))) return std::nullopt;
    return connected_ + std::chrono::milliseconds(ms);
  }

  asio::awaitable<void> serve() {
    Parser parser;
    std::string out;
    std::vector<char> chunk(64 * 1024);
    for (;;) {
      // Every complete command in the buffer, then run them in order.
      std::vector<std::vector<std::string>> cmds;
      std::optional<std::string> parse_error;
      const Limits& lim = limits();
      bool reauth = false;  // an AUTH or HELLO: the commands after it get its limits
      while (!reauth) {
        auto cmd = parser.next(lim);
        if (cmd.status == Parse::incomplete) break;
        if (cmd.status == Parse::error) {
          parse_error = cmd.error;
          break;
        }
        const std::string name = cmd.args.empty() ? std::string() : lower(cmd.args[0]);
        reauth = name == "auth" || name == "hello";
        cmds.push_back(std::move(cmd.args));
      }
      bool keep = true;
      bool fed = false;  // commands arrived while a GET waited: parse them before reading on
      // The namespace these commands act in (an AUTH ends a batch, so it
      // holds for the whole batch); gone from the configuration: refused.
      RespShared* t = tenant();
      if (!t && !cmds.empty()) {
        error(out, "ERR this connection's namespace is not configured on this server any more");
        keep = false;
      }
      if (keep && t && flights_in_ && flights_in_ != t && !conn_.flights.empty()) {
        // Its single-flight windows are another namespace's: released at close, where they were taken.
        error(out, "ERR this connection compiles keys of namespace '" + flights_in_->ns +
                       "' (single-flight windows open); it cannot act in another");
        keep = false;
      }
      for (std::size_t i = 0; i < cmds.size() && keep;) {
        if (batchable_get(*t, conn_, cmds[i])) {
          // A run of plain GETs: one trip to the storage pool for the lot.
          std::size_t j = i + 1;
          while (j < cmds.size() && batchable_get(*t, conn_, cmds[j])) ++j;
          i += co_await get_batch(*t, conn_, cmds, i, j, out);
        } else {
          keep = co_await execute(*t, conn_, cmds[i], out);
          ++i;
        }
        if (!conn_.flights.empty() && flights_in_ != t) flights_in_ = t;
        if (watch_) {
          // A GET waited: the bytes read meanwhile are the next commands.
          co_await watch_->stop();
          watch_.reset();
          const bool gone = client_->gone;
          client_.reset();
          if (gone) {
            spdlog::info("RESP {}: went away while its GET waited; wait ended", conn_.peer);
            co_return;
          }
          if (watched_.size() > 0) {
            const auto bytes = watched_.cdata();
            parser.feed(std::string_view(static_cast<const char*>(bytes.data()), bytes.size()));
            watched_.consume(watched_.size());
            fed = true;
          }
        }
        if (out.size() >= (1u << 20)) co_await flush(out);  // long pipelines: do not hoard replies
      }
      if (keep && parse_error) {
        error(out, "ERR " + *parse_error);
        keep = false;
      }
      co_await flush(out);
      if (!keep || sh_.s.draining.load()) co_return;
      if (reauth) continue;  // parse what followed it with the limits it earned
      if (fed) continue;
      // A command completed: what is left started arriving with this read
      // (a pipelining client is never timed by its previous commands).
      if (!cmds.empty()) command_started_.reset();
      arm_deadline(parser);
      boost::system::error_code ec;
      const std::size_t n = co_await stream_.async_read_some(asio::buffer(chunk), asio::redirect_error(asio::use_awaitable, ec));
      idle_ = false;
      if (ec) {
        if (ec == beast::error::timeout) {
          const auto auth = auth_deadline();
          if (auth && std::chrono::steady_clock::now() >= *auth) {
            sh_.s.metrics.resp_auth_timeouts.fetch_add(1, std::memory_order_relaxed);
            spdlog::info("RESP {}: not authenticated within {} ms; closed", conn_.peer,
                         sh_.s.config.resp_auth_timeout_ms);
          } else {
            spdlog::info("RESP {}: {} timed out; closed", conn_.peer,
                         command_started_ ? "a command" : "an idle connection");
          }
        }
        co_return;  // closed, timed out or cancelled by a drain
      }
      parser.feed(std::string_view(chunk.data(), n));
    }
  }

  asio::awaitable<void> flush(std::string& out) {
    if (out.empty()) co_return;
    stream_.expires_after(std::chrono::milliseconds(sh_.s.config.write_timeout_ms) +
                          std::chrono::seconds(out.size() / sh_.s.config.min_transfer_rate));
    boost::system::error_code ec;
    co_await asio::async_write(stream_, asio::buffer(out), asio::redirect_error(asio::use_awaitable, ec));
    out.clear();
    if (ec) throw boost::system::system_error(ec);
  }

  // A GET about to wait in a single-flight window: read the connection
  // meanwhile (server/wait_watch.hpp), so a client that closes ends the
  // wait and frees its connection; what it sends is kept in watched_.
  std::shared_ptr<ClientWatch> watch_client() {
    client_ = std::make_shared<ClientWatch>();
    stream_.expires_never();  // the window bounds the wait; no read deadline applies
    watch_.emplace(stream_, watched_, k_watch_keep, client_, shared_from_this());
    return client_;
  }

  static constexpr std::size_t k_watch_keep = 64 * 1024;

  beast::tcp_stream stream_;
  beast::flat_buffer watched_;
  std::optional<WaitWatch<beast::tcp_stream, beast::flat_buffer>> watch_;
  std::shared_ptr<ClientWatch> client_;
  RespShared& sh_;             // the default namespace's; its tenants hold the others
  RespShared* flights_in_ = nullptr;  // the namespace whose flights conn_.flights holds
  Connections& connections_;
  Conn conn_;
  std::uint64_t id_ = 0;
  bool idle_ = false;
  std::optional<std::chrono::steady_clock::time_point> command_started_;
  const std::chrono::steady_clock::time_point connected_ = std::chrono::steady_clock::now();
  const Limits read_limits_ = small_limits(true);
  const Limits anonymous_limits_ = small_limits(false);
};

}  // namespace

void start_resp_session(tcp::socket socket, RespShared& shared, Connections& connections) {
  std::make_shared<Session>(std::move(socket), shared, connections)->start();
}

}  // namespace kcache::server::resp
