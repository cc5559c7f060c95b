#include "server/resp/resp_tenants.hpp"

namespace kcache::server::resp {

RespTenants::RespTenants(RespShared& root, FlightTableFactory make_flights)
    : root_(root), make_flights_(std::move(make_flights)) {
  root_.tenants = this;
}

RespShared* RespTenants::for_ns(const std::string& ns) {
  if (ns == k_default_namespace) return &root_;
  auto found = root_.s.namespaces.find(ns);
  if (!found) return nullptr;
  std::lock_guard lock(mu_);
  auto it = tenants_.find(ns);
  if (it != tenants_.end()) return it->second.shared.get();
  const Services& r = root_.s;
  Tenant t;
  t.hot = std::make_unique<HotTier>(0, 0);
  t.services = std::make_unique<Services>(Services{r.config, *found->store, r.namespaces, r.history, r.leases, r.waiters,
                                                   r.landings, *t.hot, r.metrics, r.authorizer, r.trusted_keys, r.pool,
                                                   r.draining, r.connections_active, r.upload_bytes_in_flight, r.admin});
  t.shared = std::make_unique<RespShared>(*t.services, make_flights_());
  t.shared->ns = ns;
  t.shared->limits = root_.limits;
  t.shared->expiries.set_limit(r.config.resp_max_expiries);
  return tenants_.emplace(ns, std::move(t)).first->second.shared.get();
}

void RespTenants::each(const std::function<void(RespShared&)>& fn) {
  std::vector<RespShared*> all{&root_};
  {
    std::lock_guard lock(mu_);
    for (auto& [ns, t] : tenants_) all.push_back(t.shared.get());
  }
  for (auto* t : all) fn(*t);  // unlocked: fn may block (storage)
}

}  // namespace kcache::server::resp
