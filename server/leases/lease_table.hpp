// LeaseTable: single-flight for compiles. At most one live lease per key; the
// holder compiles while others wait, then uploads (which releases it).
//
// Contract:
//  - acquire() grants a lease with a fresh random 128-bit token when no live
//    lease exists, else reports how long the current one has left.
//  - renew() extends a live lease for its holder only (the token must match,
//    compared in constant time); an expired lease cannot be renewed.
//  - release() ends a live lease for its holder only.
//  - Leases expire by themselves at their deadline: an expired lease is
//    treated as absent everywhere, and counted once as expired.
//  - Times are steady-clock based; ttl_ms > 0.
//  - The in-process table holds at most max_leases live leases; a grant past
//    that is refused (table_full), never an old lease dropped.
//  - Failures of a shared table (Redis down) are values: `error` set on a
//    grant or renewal, LeaseOutcome::unavailable on release; live_until()
//    then answers nullopt (a waiter stops waiting and compiles itself) and
//    list()/counters() answer empty/zero.
// Two implementations: in-process (one mutex-protected map; the default)
// and Redis (server/leases/redis_lease_table.cpp: shared by every replica on one
// Redis, chosen when --storage is redis://).
// Thread safety: every method may be called concurrently from any thread.
// Blocking: the Redis table does network I/O in every method; callers on
// I/O threads hop to the blocking pool first (run_blocking), as for storage.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace kcache::server {

using Clock = std::chrono::steady_clock;

struct LeaseGrant {
  std::optional<Error> error;         // the table could not be reached
  bool granted = false;
  std::string token;                  // when granted
  std::uint64_t ttl_ms = 0;           // when granted
  std::uint64_t remaining_ms = 0;     // when held by another
  bool table_full = false;            // not granted: the table holds its maximum of live leases
};

enum class LeaseOutcome { ok, not_holder, no_lease, unavailable };

struct LeaseRenewal {
  std::optional<Error> error;      // the table could not be reached
  LeaseOutcome outcome = LeaseOutcome::no_lease;
  std::uint64_t ttl_ms = 0;        // ok: the new time to live
  std::uint64_t remaining_ms = 0;  // not_holder: what the other's lease has left
};

struct LeaseInfo {
  std::string key;
  std::string holder;  // informational: the holder's peer address and client id
  std::int64_t acquired_unix_ms = 0;
  std::uint64_t age_ms = 0;
  std::uint64_t remaining_ms = 0;
  std::uint64_t renewals = 0;
};

struct LeaseCounters {
  std::uint64_t granted = 0;
  std::uint64_t renewed = 0;
  std::uint64_t released = 0;
  std::uint64_t expired = 0;
  std::uint64_t active = 0;
};

class LeaseTable {
 public:
  virtual ~LeaseTable() = default;
  virtual LeaseGrant acquire(const std::string& key, const std::string& holder) = 0;
  virtual LeaseRenewal renew(const std::string& key, const std::string& token) = 0;
  virtual LeaseOutcome release(const std::string& key, const std::string& token) = 0;
  // When the live lease on `key` ends if not renewed; nullopt when none.
  virtual std::optional<Clock::time_point> live_until(const std::string& key) = 0;
  // Live leases, sorted by key.
  virtual std::vector<LeaseInfo> list() = 0;
  // Drops expired leases (counting them); called periodically.
  virtual void sweep() = 0;
  virtual LeaseCounters counters() = 0;
  virtual std::uint64_t ttl_ms() const = 0;
};

// At most max_leases live leases at once (expired ones are dropped first): a
// client with a write token cannot grow the table without bound; past the
// cap acquire() answers table_full.
constexpr std::uint64_t k_default_max_leases = 100'000;
std::unique_ptr<LeaseTable> make_in_process_lease_table(std::uint64_t ttl_ms,
                                                        std::uint64_t max_leases = k_default_max_leases);

// 128 random bits as 32 lowercase hex characters (OpenSSL RAND_bytes).
std::string random_token();

}  // namespace kcache::server
