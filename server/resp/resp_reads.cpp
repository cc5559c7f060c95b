#include "server/resp/resp_reads.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "server/resp/resp_command_support.hpp"
#include "server/resp/resp_hot.hpp"

namespace kcache::server::resp {

namespace asio = boost::asio;

// GET: the value, or nil. With single-flight (see the header).
asio::awaitable<void> get(RespShared& sh, Conn& c, const std::string& key, std::string& out) {
  auto& s = sh.s;
  const std::string skey = storage_key(key);
  const std::string type = cache_type(key);
  if (auto hot = hot_value(sh, skey)) {
    s.metrics.resp_command("get", type, "hit");
    bulk(out, *unwrap_value(*hot));
    co_return;
  }
  const bool flight = flight_eligible(sh, key);
  std::shared_ptr<Waiter> waiter;
  if (flight) {
    auto ex = co_await asio::this_coro::executor;
    waiter = s.waiters.add(skey, ex);
  }
  WaiterGuard unregister(s.waiters, skey, waiter);

  struct Step {
    Result<std::vector<std::uint8_t>> got;
    LeaseGrant grant;  // tried on a miss, before any wait
    std::optional<Clock::time_point> until;
  };
  bool waited = false;
  std::shared_ptr<ClientWatch> watch;  // once the GET waits
  const auto deadline = Clock::now() + std::chrono::milliseconds(s.config.resp_flight_window_ms);
  // Only a connection that may SET the key can be its compiler: a reader's
  // miss must not make others wait for a SET that cannot come.
  const bool can_write = flight && may(sh, c, Role::write);
  auto step_job = [&sh, &skey, &c, flight, can_write, &waited] {
    Step st{lookup(sh, skey), {}, std::nullopt};
    // A miss on a flight key: become its compiler, or learn how long the
    // compiler's window lasts. Our own window, or a wait already done, is a
    // plain miss.
    if (flight && !st.got && st.got.error().code == Errc::not_found && !c.flights.count(skey)) {
      if (!waited && can_write) st.grant = sh.flights->acquire(skey, c.peer);
      if (!st.grant.granted) st.until = sh.flights->live_until(skey);
    }
    return st;
  };
  for (;;) {
    auto st = co_await run_blocking(s.pool, step_job);
    if (st.got) {
      s.metrics.resp_command("get", type, waited ? "waited_hit" : "hit");
      bulk(out, *unwrap_value(*st.got));
      co_return;
    }
    if (st.got.error().code == Errc::corrupt) {
      s.metrics.storage_error("get_corrupt");
    } else if (st.got.error().code != Errc::not_found) {
      storage_error(s, out, "get", st.got.error());
      co_return;
    }
    if (st.grant.granted) {
      c.flights[skey] = st.grant.token;  // this connection compiles; others wait for its SET
      s.metrics.resp_command("get", type, "miss_compiler");
      null(out, c.proto);
      co_return;
    }
    if (!flight || !st.until || Clock::now() >= deadline || s.draining.load()) break;
    if (waiter->take_wake()) continue;
    if (!watch && c.watch_client) {
      // The client going away ends the wait (on this strand, as the timer).
      watch = c.watch_client();
      watch->on_gone = [w = std::weak_ptr<Waiter>(waiter)] {
        if (auto p = w.lock()) p->timer.cancel();
      };
    }
    if (watch && watch->gone) {
      // The client closed while it waited: no reply; the session closes.
      s.metrics.resp_command("get", type, "client_gone");
      co_return;
    }
    waited = true;
    waiter->mark_waiting();
    waiter->timer.expires_at(std::min(deadline, *st.until + std::chrono::milliseconds(1)));
    boost::system::error_code ec;
    co_await waiter->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  s.metrics.resp_command("get", type, waited ? "waited_miss" : "miss");
  null(out, c.proto);
}

asio::awaitable<void> mget(RespShared& sh, const Conn& c, std::vector<std::string>& args, std::string& out) {
  // Each distinct key is read once; the reply (every value it repeats
  // included) is capped, so a short MGET cannot make the server hold a
  // reply many times the size of what it stores.
  constexpr std::size_t k_reply_bytes = 64u << 20;
  std::map<std::string_view, Result<std::vector<std::uint8_t>>> got;
  bool too_big = false;
  const Error* failed = nullptr;  // a storage failure (not a miss): the whole command fails
  auto job = [&sh, &args, &got, &too_big, &failed] {
    std::size_t reply = 0;
    for (std::size_t i = 1; i < args.size() && !too_big && failed == nullptr; ++i) {
      auto it = got.find(args[i]);
      if (it == got.end()) it = got.emplace(args[i], lookup(sh, storage_key(args[i]))).first;
      if (it->second) {
        reply += it->second->size();
      } else if (it->second.error().code != Errc::not_found && it->second.error().code != Errc::corrupt) {
        failed = &it->second.error();
      }
      too_big = reply > k_reply_bytes;
    }
    return true;
  };
  co_await run_blocking(sh.s.pool, job);
  if (failed != nullptr) {
    // As GET does: storage that did not answer is an error, never a miss
    // (a miss would tell PyTorch to compile, and an acknowledged value would
    // read as gone while Redis restarts).
    storage_error(sh.s, out, "mget", *failed);
    co_return;
  }
  if (too_big) {
    sh.s.metrics.resp_command("mget", "other", "refused");
    error(out, "ERR MGET reply would exceed " + std::to_string(k_reply_bytes >> 20) + " MiB; ask for fewer keys");
    co_return;
  }
  array_header(out, args.size() - 1);
  for (std::size_t i = 1; i < args.size(); ++i) {
    const auto type = cache_type(args[i]);
    const auto& r = got.at(args[i]);
    if (r) {
      sh.s.metrics.resp_command("mget", type, "hit");
      bulk(out, *unwrap_value(*r));
    } else {
      if (r.error().code == Errc::corrupt) sh.s.metrics.storage_error("get_corrupt");
      sh.s.metrics.resp_command("mget", type, "miss");
      null(out, c.proto);
    }
  }
}

bool batchable_get(const RespShared& sh, const Conn& c, const std::vector<std::string>& args) {
  return args.size() == 2 && lower(args[0]) == "get" && !flight_eligible(sh, args[1]) &&
         may(sh, c, Role::read);
}

asio::awaitable<std::size_t> get_batch(RespShared& sh, const Conn& c,
                                       const std::vector<std::vector<std::string>>& cmds,
                                       std::size_t begin, std::size_t end, std::string& out) {
  constexpr std::size_t k_batch_bytes = 1u << 20;
  // A run of hot values at the front is answered here, with no hop.
  std::size_t hot = 0;
  for (std::size_t i = begin; i < end; ++i, ++hot) {
    auto bytes = hot_value(sh, storage_key(cmds[i][1]));
    if (!bytes) break;
    sh.s.metrics.resp_command("get", cache_type(cmds[i][1]), "hit");
    bulk(out, *unwrap_value(*bytes));
  }
  if (hot > 0) co_return hot;
  std::vector<Result<std::vector<std::uint8_t>>> got;
  auto job = [&sh, &cmds, &got, begin, end] {
    std::size_t held = 0;
    for (std::size_t i = begin; i < end && (i == begin || held < k_batch_bytes); ++i) {
      got.push_back(lookup(sh, storage_key(cmds[i][1])));
      if (got.back()) held += got.back()->size();
    }
    return true;
  };
  co_await run_blocking(sh.s.pool, job);
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto type = cache_type(cmds[begin + k][1]);
    auto& r = got[k];
    if (r) {
      sh.s.metrics.resp_command("get", type, "hit");
      bulk(out, *unwrap_value(*r));
      continue;
    }
    if (r.error().code == Errc::corrupt) {
      sh.s.metrics.storage_error("get_corrupt");
    } else if (r.error().code != Errc::not_found) {
      storage_error(sh.s, out, "get", r.error());
      continue;
    }
    sh.s.metrics.resp_command("get", type, "miss");
    null(out, c.proto);
  }
  co_return got.size();
}

}  // namespace kcache::server::resp
