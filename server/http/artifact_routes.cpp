// GET / HEAD / PUT / DELETE /v1/artifacts/{key}.
#include <algorithm>
#include <chrono>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "server/http/bundle_check.hpp"
#include "server/http/handlers.hpp"
#include "server/http/upload_spool.hpp"
#include "server/parse_uint.hpp"
#include "server/services.hpp"

namespace kcache::server {

namespace asio = boost::asio;

namespace {

Response artifact_found(std::vector<std::uint8_t> bytes) {
  Response r;
  r.status = 200;
  r.body = std::move(bytes);
  r.set("Content-Type", "application/octet-stream");
  return r;
}

Response not_found(const std::string& key) {
  return error_response(404, "not_found", "no artifact stored under " + key);
}

// GET, optionally waiting while a live lease exists on the key. The waiter
// is registered before the first lookup, so a PUT landing between the
// lookup and the wait still wakes it (Waiter::take_wake).
asio::awaitable<Response> handle_get(Services& s, Request& req, const std::string& key) {
  std::uint64_t wait_ms = 0;
  if (auto it = req.query.find("wait_ms"); it != req.query.end()) {
    auto v = parse_uint(it->second);
    if (!v) co_return error_response(400, "bad_query", "wait_ms must be a non-negative integer (milliseconds)");
    wait_ms = std::min(*v, s.config.max_wait_ms);
  }
  if (auto hot = s.hot.get(key)) {
    // A hot hit: answered here, on the strand. Now and then the backend
    // reads it too (its LRU and hit count; and it may have dropped it).
    s.metrics.hits.fetch_add(1, std::memory_order_relaxed);
    s.metrics.hot_hits_http.fetch_add(1, std::memory_order_relaxed);
    if (s.hot.needs_touch(key)) {
      asio::post(s.pool, [&s, key] {
        auto r = s.backend.get(key);
        if (!r && (r.error().code == Errc::not_found || r.error().code == Errc::corrupt)) s.hot.erase(key);
      });
    }
    Response r = artifact_found({});
    r.shared_body = std::move(hot);
    co_return r;
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(wait_ms);
  std::shared_ptr<Waiter> waiter;
  if (wait_ms > 0) {
    auto ex = co_await asio::this_coro::executor;
    waiter = s.waiters.add(key, ex);
    // The client going away ends the wait (on this strand, as the timer).
    if (req.watch) req.watch->on_gone = [w = std::weak_ptr<Waiter>(waiter)] {
      if (auto p = w.lock()) p->timer.cancel();
    };
  }
  WaiterGuard unregister(s.waiters, key, waiter);
  auto client_gone = [&req] { return req.watch && req.watch->gone; };

  bool waited = false;
  struct Lookup {
    Result<std::vector<std::uint8_t>> got;
    std::optional<Clock::time_point> lease_until;  // looked up only on a miss while waiting
    std::shared_ptr<const std::vector<std::uint8_t>> shared;  // the bytes, when they went to the hot tier
  };
  const bool waiting = waiter != nullptr;
  auto lookup_job = [&s, &key, waiting] {
    const auto since = s.hot.generation();
    Lookup l{s.backend.get(key), std::nullopt, nullptr};
    if (l.got && s.hot.enabled()) {
      // Move the bytes into the tier and answer from the same buffer.
      l.shared = std::make_shared<const std::vector<std::uint8_t>>(std::move(l.got.value()));
      s.hot.put(key, l.shared, since);
    }
    if (waiting && !l.got && l.got.error().code == Errc::not_found) l.lease_until = s.leases.live_until(key);
    return l;
  };
  for (;;) {
    auto lookup = co_await run_blocking(s.pool, lookup_job);
    auto& got = lookup.got;
    if (got) {
      s.metrics.hits.fetch_add(1, std::memory_order_relaxed);
      if (waited) s.metrics.waits_fulfilled.fetch_add(1, std::memory_order_relaxed);
      Response r = artifact_found(lookup.shared ? std::vector<std::uint8_t>{} : std::move(got.value()));
      r.shared_body = std::move(lookup.shared);
      if (waited) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        r.set("X-Kcache-Waited-Ms", std::to_string(ms));
      }
      co_return r;
    }
    if (got.error().code == Errc::corrupt) {
      // The backend has quarantined it; to the client it is a miss.
      s.metrics.misses.fetch_add(1, std::memory_order_relaxed);
      s.metrics.storage_error("get_corrupt");
      co_return error_response(404, "not_found", "the stored object failed verification and was removed");
    }
    if (got.error().code != Errc::not_found) co_return storage_failure(s, "get", got.error());

    const auto lease_until = lookup.lease_until;
    auto now = Clock::now();
    if (client_gone()) {
      auto r = error_response(499, "client_closed_request", "the client went away while its GET waited");
      r.close = true;
      co_return r;
    }
    if (!lease_until || now >= deadline) break;
    if (s.draining.load()) {
      auto r = error_response(503, "shutting_down", "the server is shutting down; retry the wait elsewhere");
      r.set("Retry-After", "1");
      co_return r;
    }
    if (waiter->take_wake()) continue;  // landed or released while we looked
    if (!waited) {
      waited = true;
      s.metrics.leases_waited.fetch_add(1, std::memory_order_relaxed);
    }
    // Sleep until the landing (the timer is cancelled), the wait's end or
    // the lease's expiry, whichever is first; then look again.
    waiter->timer.expires_at(std::min(deadline, *lease_until + std::chrono::milliseconds(1)));
    boost::system::error_code ec;
    co_await waiter->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  s.metrics.misses.fetch_add(1, std::memory_order_relaxed);
  co_return not_found(key);
}

asio::awaitable<Response> handle_head(Services& s, const std::string& key) {
  auto h_job = [&s, &key] { return s.backend.head(key); };
  auto h = co_await run_blocking(s.pool, h_job);
  if (!h) {
    if (h.error().code == Errc::not_found) co_return error_response(404, "not_found", "");
    co_return storage_failure(s, "head", h.error());
  }
  Response r;
  r.status = 200;
  r.head_length = h->size;
  r.set("Content-Type", "application/octet-stream");
  co_return r;
}

asio::awaitable<Response> handle_put(Services& s, Request& req, const std::string& key) {
  if (req.body.empty() && !(req.spool && req.spool->size() > 0)) {
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    co_return error_response(400, "empty_body", "PUT needs the bundle as the request body");
  }
  struct Outcome {
    Result<CheckedUpload> checked;
    std::optional<Result<storage::PutOutcome>> put;
    bool released;
  };
  // A small body is in memory; a large one in its spool file, checked and
  // stored through a read-only mapping (no copy in the process's memory).
  auto body = std::make_shared<std::vector<std::uint8_t>>(std::move(req.body));
  std::shared_ptr<UploadSpool> spool = std::move(req.spool);
  const std::uint64_t size = spool ? spool->size() : body->size();
  // Keys reloaded (SIGHUP) while this upload is checked do not affect it.
  const auto trust = s.trusted_keys.snapshot();
  const SignaturePolicy signatures{trust.get(), s.config.require_signed};
  const std::string* lease_token = req.header("x-kcache-lease");
  auto outcome_job = [&s, &key, &body, &spool, &signatures, lease_token] {
    std::optional<UploadSpool::Mapping> mapped;
    std::span<const std::uint8_t> bytes(*body);
    if (spool) {
      auto m = spool->map();
      if (!m) return Outcome{CheckedUpload{}, Result<storage::PutOutcome>(m.error()), false};
      bytes = mapped.emplace(std::move(*m)).bytes();
    }
    Outcome o{check_upload(key, bytes, s.config.max_body_bytes, signatures), std::nullopt, false};
    if (o.checked) {
      o.put = spool ? s.backend.put_span(key, bytes, o.checked->meta) : s.backend.put(key, *body, o.checked->meta);
    }
    if (o.put && *o.put) {
      if (lease_token) o.released = s.leases.release(key, *lease_token) == LeaseOutcome::ok;
      // Waiters on this key, on this replica and every other, look again.
      s.landings.publish(key);
    }
    return o;
  };
  auto outcome = co_await run_blocking(s.pool, outcome_job);
  if (!outcome.checked) {
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    const Error& e = outcome.checked.error();
    int status = e.code == Errc::too_large ? 413 : 400;
    if (e.code == Errc::bad_signature) {
      co_return error_response(400, "bad_signature",
                               "bundle refused, nothing stored: " + e.message +
                                   (s.config.require_signed ? " (this server accepts only bundles signed by a trusted key)"
                                                            : " (signed bundles must verify against a trusted key)"));
    }
    co_return error_response(status, errc_name(e.code), "bundle refused, nothing stored: " + e.message);
  }
  const auto& put = *outcome.put;
  if (!put) {
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    if (put.error().code == Errc::too_large) co_return error_response(413, "too_large", put.error().message);
    co_return storage_failure(s, "put", put.error());
  }
  const auto& meta = outcome.checked->meta;
  const bool stored = *put == storage::PutOutcome::stored;
  if (stored) {
    s.metrics.puts_stored.fetch_add(1, std::memory_order_relaxed);
    s.metrics.stored(meta.target, meta.mode, size);
  } else {
    s.metrics.puts_present.fetch_add(1, std::memory_order_relaxed);
  }
  const bool released = outcome.released;
  nlohmann::json body_json = {{"key", key},
                              {"stored", stored},
                              {"size", size},
                              {"digest", outcome.checked->digest_hex},
                              {"label", meta.label},
                              {"lease_released", released}};
  auto r = json_response(stored ? 201 : 200, body_json);
  if (stored) r.set("Location", "/v1/artifacts/" + key);
  co_return r;
}

asio::awaitable<Response> handle_delete(Services& s, const std::string& key) {
  auto st_job = [&s, &key] {
    auto removed = s.backend.remove(key);
    s.hot.erase(key);
    return removed;
  };
  auto st = co_await run_blocking(s.pool, st_job);
  if (!st) {
    if (st.error().code == Errc::not_found) co_return not_found(key);
    co_return storage_failure(s, "remove", st.error());
  }
  Response r;
  r.status = 204;
  co_return r;
}

}  // namespace

asio::awaitable<Response> handle_artifact(Services& s, Request& req, const RouteMatch& m) {
  if (req.method == "GET") co_return co_await handle_get(s, req, m.key);
  if (req.method == "HEAD") co_return co_await handle_head(s, m.key);
  if (req.method == "PUT") co_return co_await handle_put(s, req, m.key);
  co_return co_await handle_delete(s, m.key);
}

}  // namespace kcache::server
