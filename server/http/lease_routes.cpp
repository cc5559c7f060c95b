// POST /v1/leases/{key}, POST /v1/leases/{key}/renew, DELETE /v1/leases/{key},
// GET /v1/leases.
#include <nlohmann/json.hpp>

#include "server/http/handlers.hpp"
#include "server/services.hpp"

namespace kcache::server {

namespace asio = boost::asio;

namespace {

// Informational holder name: the peer and, if sent, X-Kcache-Client.
std::string holder_of(const Request& req) {
  std::string h = req.peer;
  if (const std::string* client = req.header("x-kcache-client")) {
    std::string c = client->substr(0, 64);
    for (auto& ch : c) {
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
    }
    h += " " + c;
  }
  return h;
}

Response lease_held(std::uint64_t remaining_ms) {
  auto r = json_response(409, {{"error", "lease_held"},
                               {"message", "another client holds the lease on this key"},
                               {"remaining_ms", remaining_ms}});
  return r;
}

Response missing_token() {
  return error_response(400, "missing_lease", "this request needs the lease token in the X-Kcache-Lease header");
}

Response lease_unavailable(Services& s, const Error& e) {
  return storage_failure(s, "lease", Error{Errc::unavailable, e.message});
}

Response token_refused(const LeaseRenewal& r) {
  if (r.outcome == LeaseOutcome::not_holder) {
    return json_response(409, {{"error", "not_holder"},
                               {"message", "the X-Kcache-Lease token is not the live lease's"},
                               {"remaining_ms", r.remaining_ms}});
  }
  return error_response(409, "no_lease", "no live lease on this key (it expired or was released)");
}

// Every lease-table call runs on the blocking pool: the Redis table does
// network I/O (server/leases/lease_table.hpp).
// Lease tables know keys scoped by namespace (server/namespaces.hpp
// scoped_key): `key` is the route's bare key, `skey` the table's.
asio::awaitable<Response> acquire(Services& s, Request& req, const NamespacePtr& ns, const std::string& key,
                                  const std::string& skey) {
  auto present = [ns, key] { return ns->store->head(key); };
  auto h = co_await run_blocking(s.pool, present);
  if (h) co_return json_response(200, {{"exists", true}});
  if (h.error().code != Errc::not_found) co_return storage_failure(s, "head", h.error());
  const std::string holder = holder_of(req);
  auto grant_job = [&s, &skey, &holder] { return s.leases.acquire(skey, holder); };
  LeaseGrant g = co_await run_blocking(s.pool, grant_job);
  if (g.error) co_return lease_unavailable(s, *g.error);
  if (g.table_full) {
    auto r = error_response(503, "too_many_leases",
                            "the server holds --max-leases live leases; compile without one or retry shortly");
    r.set("Retry-After", "1");
    co_return r;
  }
  if (!g.granted) co_return lease_held(g.remaining_ms);
  // The previous holder may have uploaded between our lookup and the grant
  // (its PUT released its lease): look once more so nobody compiles twice.
  h = co_await run_blocking(s.pool, present);
  if (h) {
    auto undo_job = [&s, &skey, &g] {
      s.leases.release(skey, g.token);
      s.landings.publish(skey);
      return true;
    };
    co_await run_blocking(s.pool, undo_job);
    co_return json_response(200, {{"exists", true}});
  }
  auto r = json_response(201, {{"lease", g.token}, {"ttl_ms", g.ttl_ms}});
  r.set("X-Kcache-Lease", g.token);
  co_return r;
}

asio::awaitable<Response> renew(Services& s, Request& req, const std::string& key) {  // key: scoped
  const std::string* token = req.header("x-kcache-lease");
  if (!token) co_return missing_token();
  auto renew_job = [&s, &key, token] { return s.leases.renew(key, *token); };
  LeaseRenewal r = co_await run_blocking(s.pool, renew_job);
  if (r.error) co_return lease_unavailable(s, *r.error);
  if (r.outcome != LeaseOutcome::ok) co_return token_refused(r);
  co_return json_response(200, {{"lease", *token}, {"ttl_ms", r.ttl_ms}});
}

asio::awaitable<Response> release(Services& s, Request& req, const std::string& key) {  // key: scoped
  const std::string* token = req.header("x-kcache-lease");
  if (!token) co_return missing_token();
  auto release_job = [&s, &key, token] {
    LeaseRenewal info;
    info.outcome = s.leases.release(key, *token);
    if (info.outcome == LeaseOutcome::ok) {
      // Waiters (on every replica) stop waiting: nothing will land from this holder.
      s.landings.publish(key);
    } else if (info.outcome == LeaseOutcome::not_holder) {
      if (auto until = s.leases.live_until(key)) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*until - Clock::now()).count();
        info.remaining_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(left, 0));
      }
    }
    return info;
  };
  LeaseRenewal info = co_await run_blocking(s.pool, release_job);
  if (info.outcome == LeaseOutcome::unavailable) {
    co_return lease_unavailable(s, Error{Errc::unavailable, "the lease table did not answer"});
  }
  if (info.outcome != LeaseOutcome::ok) co_return token_refused(info);
  Response r;
  r.status = 204;
  co_return r;
}

// The namespace's leases only: their scoped keys carry its prefix (none in
// "default", whose keys have no '/').
asio::awaitable<Response> list(Services& s, const std::string& ns) {
  auto list_job = [&s] { return s.leases.list(); };
  auto leases = co_await run_blocking(s.pool, list_job);
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& l : leases) {
    auto key = unscoped_key(ns, l.key);
    if (!key) continue;
    arr.push_back({{"key", *key},
                   {"namespace", ns},
                   {"holder", l.holder},
                   {"acquired_unix_ms", l.acquired_unix_ms},
                   {"age_ms", l.age_ms},
                   {"remaining_ms", l.remaining_ms},
                   {"renewals", l.renewals}});
  }
  co_return json_response(200, {{"leases", arr}, {"ttl_ms", s.leases.ttl_ms()}});
}

}  // namespace

asio::awaitable<Response> handle_lease(Services& s, Request& req, const RouteMatch& m) {
  auto ns = s.namespaces.find(m.ns);
  if (!ns) co_return namespace_gone(m.ns);
  if (m.id == RouteId::leases) co_return co_await list(s, ns->name());
  const std::string skey = scoped_key(ns->name(), m.key);
  if (m.id == RouteId::lease_renew) co_return co_await renew(s, req, skey);
  if (req.method == "DELETE") co_return co_await release(s, req, skey);
  co_return co_await acquire(s, req, ns, m.key, skey);
}

}  // namespace kcache::server
