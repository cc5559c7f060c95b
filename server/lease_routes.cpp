// POST /v1/leases/{key}, POST /v1/leases/{key}/renew, DELETE /v1/leases/{key},
// GET /v1/leases.
#include <nlohmann/json.hpp>

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

Response token_refused(const LeaseRenewal& r) {
  if (r.outcome == LeaseOutcome::not_holder) {
    return json_response(409, {{"error", "not_holder"},
                               {"message", "the X-Kcache-Lease token is not the live lease's"},
                               {"remaining_ms", r.remaining_ms}});
  }
  return error_response(409, "no_lease", "no live lease on this key (it expired or was released)");
}

asio::awaitable<Response> acquire(Services& s, Request& req, const std::string& key) {
  auto present = [&s, key] { return s.backend.head(key); };
  auto h = co_await run_blocking(s.pool, present);
  if (h) co_return json_response(200, {{"exists", true}});
  if (h.error().code != Errc::not_found) co_return storage_failure(s, "head", h.error());
  LeaseGrant g = s.leases.acquire(key, holder_of(req));
  if (!g.granted) co_return lease_held(g.remaining_ms);
  // The previous holder may have uploaded between our lookup and the grant
  // (its PUT released its lease): look once more so nobody compiles twice.
  h = co_await run_blocking(s.pool, present);
  if (h) {
    s.leases.release(key, g.token);
    s.waiters.notify(key);
    co_return json_response(200, {{"exists", true}});
  }
  auto r = json_response(201, {{"lease", g.token}, {"ttl_ms", g.ttl_ms}});
  r.set("X-Kcache-Lease", g.token);
  co_return r;
}

Response renew(Services& s, Request& req, const std::string& key) {
  const std::string* token = req.header("x-kcache-lease");
  if (!token) return missing_token();
  LeaseRenewal r = s.leases.renew(key, *token);
  if (r.outcome != LeaseOutcome::ok) return token_refused(r);
  return json_response(200, {{"lease", *token}, {"ttl_ms", r.ttl_ms}});
}

Response release(Services& s, Request& req, const std::string& key) {
  const std::string* token = req.header("x-kcache-lease");
  if (!token) return missing_token();
  LeaseOutcome o = s.leases.release(key, *token);
  if (o != LeaseOutcome::ok) {
    LeaseRenewal info;
    info.outcome = o;
    if (o == LeaseOutcome::not_holder) {
      if (auto until = s.leases.live_until(key)) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*until - Clock::now()).count();
        info.remaining_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(left, 0));
      }
    }
    return token_refused(info);
  }
  // Waiters stop waiting: nothing will land from this holder.
  s.waiters.notify(key);
  Response r;
  r.status = 204;
  return r;
}

Response list(Services& s) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& l : s.leases.list()) {
    arr.push_back({{"key", l.key},
                   {"holder", l.holder},
                   {"acquired_unix_ms", l.acquired_unix_ms},
                   {"age_ms", l.age_ms},
                   {"remaining_ms", l.remaining_ms},
                   {"renewals", l.renewals}});
  }
  return json_response(200, {{"leases", arr}, {"ttl_ms", s.leases.ttl_ms()}});
}

}  // namespace

asio::awaitable<Response> handle_lease(Services& s, Request& req, const RouteMatch& m) {
  if (m.id == RouteId::leases) co_return list(s);
  if (m.id == RouteId::lease_renew) co_return renew(s, req, m.key);
  if (req.method == "DELETE") co_return release(s, req, m.key);
  co_return co_await acquire(s, req, m.key);
}

}  // namespace kcache::server
