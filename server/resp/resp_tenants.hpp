// RespTenants: the RESP endpoint's state per namespace (docs/namespaces.md).
// A RESP connection acts in the namespace its AUTH resolves to (the user
// name, else the token's only namespace, else "default"); its commands run
// on that namespace's RespShared, whose Services carry the namespace's own
// store, so GET, SET, EXISTS, DEL and INFO see that store only, and
// single-flight windows and expiries are per namespace. The default
// namespace's RespShared is the Server's own; the others are made here on
// first use, each with a hot tier of its own that is off (the shared hot
// tier is keyed by the RESP storage key, which two namespaces may share).
// Waiters and landings are shared: a landing in one namespace may wake a
// waiter of the same key in another, which looks again in its own store
// and waits on (a wasted lookup, never a wrong value).
// Thread safety: for_ns() and each() may be called concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/resp/resp_commands.hpp"

namespace kcache::server::resp {

class RespTenants {
 public:
  using FlightTableFactory = std::function<std::unique_ptr<LeaseTable>()>;
  // `root` is the default namespace's; its `tenants` is set to this.
  RespTenants(RespShared& root, FlightTableFactory make_flights);

  // The namespace's RespShared, or nullptr when no such namespace is
  // configured (now): never another namespace's.
  RespShared* for_ns(const std::string& ns);
  // Runs fn on every RespShared made so far, the root first.
  void each(const std::function<void(RespShared&)>& fn);

 private:
  struct Tenant {
    std::unique_ptr<HotTier> hot;  // off
    std::unique_ptr<Services> services;
    std::unique_ptr<RespShared> shared;
  };
  RespShared& root_;
  const FlightTableFactory make_flights_;
  std::mutex mu_;
  std::map<std::string, Tenant> tenants_;  // GUARDED_BY(mu_); never removed (sessions may hold them)
};

}  // namespace kcache::server::resp
