#include "client/lease_renewer.hpp"

#include <algorithm>

#include "client/log.hpp"

namespace kcache::client {

LeaseRenewer::LeaseRenewer(ServerApi& server, std::string key, std::string lease, int ttl_ms)
    : server_(server), key_(std::move(key)), lease_(std::move(lease)) {
  int interval = std::max(ttl_ms / 3, 50);
  thread_ = std::thread([this, interval] { run(interval); });
}

LeaseRenewer::~LeaseRenewer() {
  stop();
}

void LeaseRenewer::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaseRenewer::lost() const {
  std::lock_guard<std::mutex> g(mu_);
  return lost_;
}

int LeaseRenewer::renewals() const {
  std::lock_guard<std::mutex> g(mu_);
  return renewals_;
}

void LeaseRenewer::run(int interval_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (cv_.wait_for(lk, std::chrono::milliseconds(interval_ms), [this] { return stop_; })) return;
    lk.unlock();
    auto r = server_.renew(key_, lease_);
    lk.lock();
    if (!r.ok()) {
      log(LogLevel::warn,
          "lease renewal for " + key_.substr(0, 12) + "… failed: " + r.error().message);
    } else if (*r == RenewAnswer::lost) {
      log(LogLevel::warn,
          "lease on " + key_.substr(0, 12) + "… was lost while compiling (expired?)");
      lost_ = true;
      return;
    } else {
      ++renewals_;
    }
  }
}

}  // namespace kcache::client
