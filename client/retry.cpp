#include "client/retry.hpp"

#include <algorithm>
#include <random>

namespace kcache::client {

std::chrono::milliseconds backoff(const RetryPolicy& policy, int attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  double base =
      std::min<double>(policy.max_ms, policy.base_ms * double(1ull << std::clamp(attempt, 0, 20)));
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  return std::chrono::milliseconds(static_cast<long>(base * jitter(rng)));
}

bool is_retryable_error(const Error& e) {
  return e.code == Errc::unavailable;
}

bool is_retryable_status(int status) {
  return status == 502 || status == 503 || status == 504;
}

}  // namespace kcache::client
