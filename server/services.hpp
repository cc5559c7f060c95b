// Services: what route handlers share — configuration, storage, leases,
// waiters, landings, metrics, the authorizer and the blocking pool — plus
// run_blocking(), the one way a handler calls something that may block.
//
// Ownership: Server (server/server.hpp) owns every member and outlives all
// sessions. Thread safety: every member is safe for concurrent use.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "server/config.hpp"
#include "server/history.hpp"
#include "server/hot_tier.hpp"
#include "server/http_front/authorizer.hpp"
#include "server/leases/landings.hpp"
#include "server/leases/lease_table.hpp"
#include "server/leases/waiters.hpp"
#include "server/metrics.hpp"
#include "server/namespaces.hpp"
#include "server/trusted_keys.hpp"
#include "storage/backend.hpp"

namespace kcache::server {

// Bounds on the admin routes' heavy work (server/http/admin_routes.cpp):
// /v1/stats scans the whole store for its breakdown, so one scan runs at a
// time and the requests that arrive meanwhile wait for it (on their own
// strands, holding no pool thread) and share its result; /v1/entries/{key}
// reads and inspects a whole object, so at most k_max_inspections run at
// once (the rest: 503 busy).
struct AdminWork {
  static constexpr unsigned k_max_inspections = 2;
  std::mutex mu;
  bool scanning = false;                          // GUARDED_BY(mu)
  std::vector<std::function<void()>> on_scanned;  // GUARDED_BY(mu): wake the requests sharing the scan
  std::shared_ptr<const void> last_scan;          // GUARDED_BY(mu): admin_routes.cpp's Breakdown
  std::atomic<unsigned> inspections{0};
};

struct Services {
  const ServerConfig& config;
  storage::Backend& backend;  // the default namespace's store
  Namespaces& namespaces;     // every namespace's store, quota and trust (server/namespaces.hpp)
  History& history;           // per-minute hits, misses, seconds saved; recent misses (the web page)
  LeaseTable& leases;
  Waiters& waiters;
  Landings& landings;
  HotTier& hot;  // recently read artifacts (disabled with redis:// storage)  // wake waiters here and on other replicas (blocking: call on the pool)
  Metrics& metrics;
  const Authorizer& authorizer;
  const TrustedKeys& trusted_keys;
  boost::asio::thread_pool& pool;
  const std::atomic<bool>& draining;
  std::function<std::uint64_t()> connections_active;
  // Request-body bytes held now, all connections (--max-upload-bytes-in-flight).
  std::atomic<std::uint64_t>& upload_bytes_in_flight;
  std::shared_ptr<AdminWork> admin = std::make_shared<AdminWork>();
};

// Runs fn() on the blocking pool and resumes the calling coroutine on its
// own executor (the session strand) with the result. I/O threads never run fn.
//
// fn is taken by reference and must be a named local of the calling
// coroutine (it outlives the co_await): g++ 12 destroys closures that are
// temporaries of a co_await expression twice, so no lambda may be written
// inline in `co_await run_blocking(...)`.
template <typename F>
boost::asio::awaitable<std::invoke_result_t<F&>> run_blocking(boost::asio::thread_pool& pool, F& fn) {
  using T = std::invoke_result_t<F&>;
  F* f = &fn;
  auto initiate = [&pool, f](auto handler) {
    boost::asio::post(pool, [handler = std::move(handler), f]() mutable {
      T result = (*f)();
      auto ex = boost::asio::get_associated_executor(handler);
      boost::asio::dispatch(ex, [handler = std::move(handler), result = std::move(result)]() mutable {
        std::move(handler)(std::move(result));
      });
    });
  };
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>, void(T)>(initiate,
                                                                                    boost::asio::use_awaitable);
}

}  // namespace kcache::server
