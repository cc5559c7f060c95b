#include "server/leases/lease_table.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <stdexcept>

#include "common/hex.hpp"

namespace kcache::server {

namespace {

std::uint64_t ms_between(Clock::time_point from, Clock::time_point to) {
  if (to <= from) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
  return static_cast<std::uint64_t>(std::max<std::int64_t>(ms, 1));
}

bool same_token(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class InProcessLeaseTable final : public LeaseTable {
 public:
  InProcessLeaseTable(std::uint64_t ttl_ms, std::uint64_t max_leases)
      : ttl_(std::chrono::milliseconds(ttl_ms)), ttl_ms_(ttl_ms), max_leases_(max_leases) {}

  LeaseGrant acquire(const std::string& key, const std::string& holder) override {
    auto now = Clock::now();
    std::lock_guard lock(mu_);
    auto it = live(key, now);
    if (it != leases_.end()) {
      LeaseGrant g;
      g.remaining_ms = ms_between(now, it->second.expires);
      return g;
    }
    // At the cap, drop expired leases first — at most every 100 ms, so a
    // flood of refused grants does not rescan the whole table each time.
    if (leases_.size() >= max_leases_ && now - last_sweep_ >= std::chrono::milliseconds(100)) sweep_locked(now);
    if (leases_.size() >= max_leases_) {
      LeaseGrant g;
      g.table_full = true;
      return g;
    }
    Lease l{random_token(), holder, now, now + ttl_, unix_ms(), 0};
    LeaseGrant g;
    g.granted = true;
    g.token = l.token;
    g.ttl_ms = ttl_ms_;
    leases_[key] = std::move(l);
    ++counters_.granted;
    return g;
  }

  LeaseRenewal renew(const std::string& key, const std::string& token) override {
    auto now = Clock::now();
    std::lock_guard lock(mu_);
    auto it = live(key, now);
    LeaseRenewal r;
    if (it == leases_.end()) return r;
    if (!same_token(it->second.token, token)) {
      r.outcome = LeaseOutcome::not_holder;
      r.remaining_ms = ms_between(now, it->second.expires);
      return r;
    }
    it->second.expires = now + ttl_;
    ++it->second.renewals;
    ++counters_.renewed;
    r.outcome = LeaseOutcome::ok;
    r.ttl_ms = ttl_ms_;
    return r;
  }

  LeaseOutcome release(const std::string& key, const std::string& token) override {
    auto now = Clock::now();
    std::lock_guard lock(mu_);
    auto it = live(key, now);
    if (it == leases_.end()) return LeaseOutcome::no_lease;
    if (!same_token(it->second.token, token)) return LeaseOutcome::not_holder;
    leases_.erase(it);
    ++counters_.released;
    return LeaseOutcome::ok;
  }

  std::optional<Clock::time_point> live_until(const std::string& key) override {
    std::lock_guard lock(mu_);
    auto it = live(key, Clock::now());
    if (it == leases_.end()) return std::nullopt;
    return it->second.expires;
  }

  std::vector<LeaseInfo> list() override {
    auto now = Clock::now();
    std::lock_guard lock(mu_);
    sweep_locked(now);
    std::vector<LeaseInfo> out;
    for (const auto& [key, l] : leases_) {
      out.push_back({key, l.holder, l.acquired_unix_ms, ms_between(l.acquired, now), ms_between(now, l.expires),
                     l.renewals});
    }
    return out;
  }

  void sweep() override {
    std::lock_guard lock(mu_);
    sweep_locked(Clock::now());
  }

  LeaseCounters counters() override {
    std::lock_guard lock(mu_);
    sweep_locked(Clock::now());
    LeaseCounters c = counters_;
    c.active = leases_.size();
    return c;
  }

  std::uint64_t ttl_ms() const override { return ttl_ms_; }

 private:
  struct Lease {
    std::string token;
    std::string holder;
    Clock::time_point acquired;
    Clock::time_point expires;
    std::int64_t acquired_unix_ms;
    std::uint64_t renewals;
  };
  using Map = std::map<std::string, Lease>;

  // REQUIRES: mu_ held. The live lease on key, erasing (and counting) an
  // expired one.
  Map::iterator live(const std::string& key, Clock::time_point now) {
    auto it = leases_.find(key);
    if (it == leases_.end()) return it;
    if (it->second.expires > now) return it;
    leases_.erase(it);
    ++counters_.expired;
    return leases_.end();
  }

  // REQUIRES: mu_ held.
  void sweep_locked(Clock::time_point now) {
    last_sweep_ = now;
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (it->second.expires <= now) {
        it = leases_.erase(it);
        ++counters_.expired;
      } else {
        ++it;
      }
    }
  }

  const Clock::duration ttl_;
  const std::uint64_t ttl_ms_;
  const std::uint64_t max_leases_;
  std::mutex mu_;
  Clock::time_point last_sweep_{};  // GUARDED_BY(mu_)
  Map leases_;
  LeaseCounters counters_;
};

}  // namespace

std::unique_ptr<LeaseTable> make_in_process_lease_table(std::uint64_t ttl_ms, std::uint64_t max_leases) {
  return std::make_unique<InProcessLeaseTable>(ttl_ms, max_leases);
}

std::string random_token() {
  std::array<std::uint8_t, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    // RAND_bytes only fails when the OS entropy source is broken; a
    // predictable token would let anyone release others' leases.
    throw std::runtime_error("RAND_bytes failed");
  }
  return to_hex(bytes);
}

}  // namespace kcache::server
