// GET / HEAD / PUT / DELETE /v1/artifacts/{key}.
#include <algorithm>
#include <chrono>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "server/http/bundle_check.hpp"
#include "server/http/handlers.hpp"
#include "server/http/miss_explain.hpp"
#include "server/http/upload_spool.hpp"
#include "server/parse_uint.hpp"
#include "server/services.hpp"
#include "storage/entry_query.hpp"

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
// A hit, counted as the compile seconds it saved where the entry's cost is
// known (server/history.hpp).
void count_hit(Services& s, const Namespace& ns, const std::string& from, const std::string& key, Response& r) {
  s.metrics.hits.fetch_add(1, std::memory_order_relaxed);
  s.metrics.ns_event(ns.name(), NsEvent::hit);
  s.history.hit(ns.name(), s.history.cost(scoped_key(from, key)).value_or(0), storage::now_ms());
  if (from != ns.name()) {
    s.metrics.ns_read_through_hit(ns.name(), from);
    r.set("X-Kcache-Read-Through", from);
  }
}

asio::awaitable<Response> handle_get(Services& s, Request& req, const NamespacePtr& ns, const std::string& key) {
  const std::string skey = scoped_key(ns->name(), key);
  const auto chain = s.namespaces.read_chain(ns);
  std::uint64_t wait_ms = 0;
  if (auto it = req.query.find("wait_ms"); it != req.query.end()) {
    auto v = parse_uint(it->second);
    if (!v) co_return error_response(400, "bad_query", "wait_ms must be a non-negative integer (milliseconds)");
    wait_ms = std::min(*v, s.config.max_wait_ms);
  }
  for (const auto& where : chain) {
    const std::string hkey = scoped_key(where->name(), key);
    auto hot = s.hot.get(hkey);
    if (!hot) continue;
    // A hot hit: answered here, on the strand. Now and then the backend
    // reads it too (its LRU and hit count; and it may have dropped it).
    s.metrics.hot_hits_http.fetch_add(1, std::memory_order_relaxed);
    if (s.hot.needs_touch(hkey)) {
      asio::post(s.pool, [&s, where, key, hkey] {
        auto r = where->store->get(key);
        if (!r && (r.error().code == Errc::not_found || r.error().code == Errc::corrupt)) s.hot.erase(hkey);
      });
    }
    Response r = artifact_found({});
    r.shared_body = std::move(hot);
    count_hit(s, *ns, where->name(), key, r);
    co_return r;
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(wait_ms);
  std::shared_ptr<Waiter> waiter;
  if (wait_ms > 0) {
    auto ex = co_await asio::this_coro::executor;
    waiter = s.waiters.add(skey, ex);
    // The client going away ends the wait (on this strand, as the timer).
    if (req.watch) req.watch->on_gone = [w = std::weak_ptr<Waiter>(waiter)] {
      if (auto p = w.lock()) p->timer.cancel();
    };
  }
  WaiterGuard unregister(s.waiters, skey, waiter);
  auto client_gone = [&req] { return req.watch && req.watch->gone; };

  bool waited = false;
  struct Lookup {
    Result<std::vector<std::uint8_t>> got;
    std::optional<Clock::time_point> lease_until;  // looked up only on a miss while waiting
    std::shared_ptr<const std::vector<std::uint8_t>> shared;  // the bytes, when they went to the hot tier
    std::string from;  // the namespace that had it
  };
  const bool waiting = waiter != nullptr;
  auto lookup_job = [&s, &key, &skey, &chain, waiting] {
    const auto since = s.hot.generation();
    Lookup l{Error{Errc::not_found, ""}, std::nullopt, nullptr, {}};
    // Its own namespace first, then each read-through link; a link's
    // failure other than not_found is a miss there, not an error here.
    for (std::size_t i = 0; i < chain.size(); ++i) {
      auto got = chain[i]->store->get(key);
      if (got || i == 0) l.got = std::move(got);
      if (l.got) {
        l.from = chain[i]->name();
        // Its compile cost, for the seconds this hit saved (once per key while remembered).
        const std::string where = scoped_key(l.from, key);
        if (!s.history.cost(where)) {
          if (auto h = chain[i]->store->head(key)) s.history.remember_cost(where, h->meta.compile_ms);
        }
        break;
      }
      if (i == 0 && l.got.error().code != Errc::not_found) break;
    }
    if (l.got && s.hot.enabled()) {
      // Move the bytes into the tier and answer from the same buffer.
      l.shared = std::make_shared<const std::vector<std::uint8_t>>(std::move(l.got.value()));
      s.hot.put(scoped_key(l.from, key), l.shared, since);
    }
    if (waiting && !l.got && l.got.error().code == Errc::not_found) l.lease_until = s.leases.live_until(skey);
    return l;
  };
  for (;;) {
    auto lookup = co_await run_blocking(s.pool, lookup_job);
    auto& got = lookup.got;
    if (got) {
      if (waited) s.metrics.waits_fulfilled.fetch_add(1, std::memory_order_relaxed);
      Response r = artifact_found(lookup.shared ? std::vector<std::uint8_t>{} : std::move(got.value()));
      r.shared_body = std::move(lookup.shared);
      count_hit(s, *ns, lookup.from, key, r);
      if (waited) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        r.set("X-Kcache-Waited-Ms", std::to_string(ms));
      }
      co_return r;
    }
    if (got.error().code == Errc::corrupt) {
      // The backend has quarantined it; to the client it is a miss.
      s.metrics.misses.fetch_add(1, std::memory_order_relaxed);
      s.metrics.ns_event(ns->name(), NsEvent::miss);
      s.history.miss(ns->name(), key, storage::now_ms());
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
      waiter->mark_waiting();
      s.metrics.leases_waited.fetch_add(1, std::memory_order_relaxed);
    }
    // Sleep until the landing (the timer is cancelled), the wait's end or
    // the lease's expiry, whichever is first; then look again.
    waiter->timer.expires_at(std::min(deadline, *lease_until + std::chrono::milliseconds(1)));
    boost::system::error_code ec;
    co_await waiter->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  s.metrics.misses.fetch_add(1, std::memory_order_relaxed);
  s.metrics.ns_event(ns->name(), NsEvent::miss);
  s.history.miss(ns->name(), key, storage::now_ms());
  co_return not_found(key);
}

asio::awaitable<Response> handle_head(Services& s, const NamespacePtr& ns, const std::string& key) {
  const auto chain = s.namespaces.read_chain(ns);
  auto h_job = [&chain, &key] {
    auto h = chain[0]->store->head(key);
    for (std::size_t i = 1; i < chain.size() && !h && h.error().code == Errc::not_found; ++i) {
      auto linked = chain[i]->store->head(key);
      if (linked) h = std::move(linked);
    }
    return h;
  };
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

asio::awaitable<Response> handle_put(Services& s, Request& req, const NamespacePtr& ns, const std::string& key) {
  const std::string skey = scoped_key(ns->name(), key);
  if (req.body.empty() && !(req.spool && req.spool->size() > 0)) {
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    s.metrics.ns_event(ns->name(), NsEvent::rejected);
    co_return error_response(400, "empty_body", "PUT needs the bundle as the request body");
  }
  struct Outcome {
    Result<CheckedUpload> checked;
    std::optional<Result<storage::PutOutcome>> put;
    bool released;
    AdmitReport admitted;
  };
  // A small body is in memory; a large one in its spool file, checked and
  // stored through a read-only mapping (no copy in the process's memory).
  auto body = std::make_shared<std::vector<std::uint8_t>>(std::move(req.body));
  std::shared_ptr<UploadSpool> spool = std::move(req.spool);
  const std::uint64_t size = spool ? spool->size() : body->size();
  // Keys reloaded (SIGHUP) while this upload is checked do not affect it.
  // The namespace's trust: its keys (and the server's), signed-only or not.
  const auto trust = ns->trusted_keys->snapshot();
  const SignaturePolicy signatures{trust.get(), ns->spec.signed_only};
  const std::string* lease_token = req.header("x-kcache-lease");
  auto outcome_job = [&s, &key, &skey, &ns, &body, &spool, &signatures, lease_token] {
    std::optional<UploadSpool::Mapping> mapped;
    std::span<const std::uint8_t> bytes(*body);
    if (spool) {
      auto m = spool->map();
      if (!m) return Outcome{CheckedUpload{}, Result<storage::PutOutcome>(m.error()), false, {}};
      bytes = mapped.emplace(std::move(*m)).bytes();
    }
    Outcome o{check_upload(key, bytes, s.config.max_body_bytes, signatures), std::nullopt, false, {}};
    if (o.checked) {
      storage::Backend& store = *ns->store;
      auto store_it = [&] { return spool ? store.put_span(key, bytes, o.checked->meta) : store.put(key, *body, o.checked->meta); };
      const bool quota = ns->spec.quota_bytes || ns->spec.quota_entries;
      if (!quota) {
        o.put = store_it();
      } else {
        // Admission and the put under the namespace's lock: two uploads
        // cannot both take the last free bytes. An entry already stored
        // needs no room.
        std::lock_guard admit_lock(*ns->admit_mu);
        if (store.head(key)) {
          o.put = store_it();
        } else if (auto admitted = s.namespaces.admit(*ns, bytes.size()); !admitted) {
          o.put = Result<storage::PutOutcome>(admitted.error());
        } else {
          o.admitted = std::move(*admitted);
          o.put = store_it();
        }
      }
    }
    if (o.put && *o.put) {
      // A region a GET here missed lately: which key fields differ from
      // the nearest stored entry (server/http/miss_explain.hpp, the web page).
      if (**o.put == storage::PutOutcome::stored && s.history.awaits_explanation(ns->name(), key)) {
        s.history.explain_miss(ns->name(), key,
                               explain_miss(*ns->store, key, o.checked->meta.label, o.checked->explanation).dump());
      }
      if (lease_token) o.released = s.leases.release(skey, *lease_token) == LeaseOutcome::ok;
      // Waiters on this key, on this replica and every other, look again.
      s.landings.publish(skey);
    }
    return o;
  };
  auto outcome = co_await run_blocking(s.pool, outcome_job);
  if (!outcome.admitted.evicted.empty()) {
    s.metrics.ns_quota_evicted(ns->name(), outcome.admitted.evicted.size(), outcome.admitted.evicted_bytes);
    for (const auto& k : outcome.admitted.evicted) s.hot.erase(scoped_key(ns->name(), k));
  }
  if (!outcome.checked) {
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    s.metrics.ns_event(ns->name(), NsEvent::rejected);
    const Error& e = outcome.checked.error();
    int status = e.code == Errc::too_large ? 413 : 400;
    if (e.code == Errc::bad_signature) {
      co_return error_response(400, "bad_signature",
                               "bundle refused, nothing stored: " + e.message +
                                   (ns->spec.signed_only ? " (namespace '" + ns->name() +
                                                               "' accepts only bundles signed by a trusted key)"
                                                         : std::string(" (signed bundles must verify against a trusted key)")));
    }
    co_return error_response(status, errc_name(e.code), "bundle refused, nothing stored: " + e.message);
  }
  const auto& put = *outcome.put;
  if (!put) {
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    if (put.error().code == Errc::full && (ns->spec.quota_bytes || ns->spec.quota_entries)) {
      s.metrics.ns_event(ns->name(), NsEvent::quota_refused);
      co_return error_response(507, "quota_exceeded", "bundle refused, nothing stored: " + put.error().message);
    }
    s.metrics.ns_event(ns->name(), NsEvent::rejected);
    if (put.error().code == Errc::too_large) co_return error_response(413, "too_large", put.error().message);
    co_return storage_failure(s, "put", put.error());
  }
  const auto& meta = outcome.checked->meta;
  const bool stored = *put == storage::PutOutcome::stored;
  if (stored) {
    s.metrics.puts_stored.fetch_add(1, std::memory_order_relaxed);
    s.metrics.ns_event(ns->name(), NsEvent::stored);
    s.history.remember_cost(skey, meta.compile_ms);
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
                              {"lease_released", released},
                              {"namespace", ns->name()},
                              {"evicted_for_quota", outcome.admitted.evicted.size()}};
  auto r = json_response(stored ? 201 : 200, body_json);
  if (stored) r.set("Location", "/v1/artifacts/" + key);
  co_return r;
}

asio::awaitable<Response> handle_delete(Services& s, const NamespacePtr& ns, const std::string& key) {
  auto st_job = [&s, &ns, &key] {
    auto removed = ns->store->remove(key);
    s.hot.erase(scoped_key(ns->name(), key));
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
  auto ns = s.namespaces.find(m.ns);
  if (!ns) co_return namespace_gone(m.ns);
  if (req.method == "GET") co_return co_await handle_get(s, req, ns, m.key);
  if (req.method == "HEAD") co_return co_await handle_head(s, ns, m.key);
  if (req.method == "PUT") co_return co_await handle_put(s, req, ns, m.key);
  co_return co_await handle_delete(s, ns, m.key);
}

}  // namespace kcache::server
