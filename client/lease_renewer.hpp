// LeaseRenewer: keeps a granted lease alive while the callback compiles.
//
// A background thread renews every ttl/3 (at least every 50 ms apart), so two
// renewals can fail in a row before the lease expires. A failed renewal is
// logged and retried at the next tick; a "lost" answer (the lease expired or
// was taken over) stops renewing — the compile goes on and the upload still
// happens (the server accepts it; first writer wins).
// Thread safety: constructed and stopped by one thread; stop() joins.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "client/server_api.hpp"

namespace kcache::client {

class LeaseRenewer {
 public:
  LeaseRenewer(ServerApi& server, std::string key, std::string lease, int ttl_ms);
  ~LeaseRenewer();  // stop()
  LeaseRenewer(const LeaseRenewer&) = delete;
  LeaseRenewer& operator=(const LeaseRenewer&) = delete;

  void stop();
  bool lost() const;
  int renewals() const;

 private:
  void run(int interval_ms);

  ServerApi& server_;
  std::string key_;
  std::string lease_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  bool lost_ = false;  // GUARDED_BY(mu_)
  int renewals_ = 0;   // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace kcache::client
