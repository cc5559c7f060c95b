// CircuitBreaker: stop calling a server that keeps failing.
//
// closed: calls go through; each transport failure counts, a success resets
// the count. After `threshold` consecutive failures it opens: allow() is
// false for `cooldown`, so callers go local at once instead of paying a
// connect timeout per call. Then it is half-open: exactly one caller is let
// through as a probe; its success closes the breaker, its failure reopens it
// for another cooldown.
// Thread safety: lock-free (atomics only), so a fork() can never inherit it
// locked. The clock is injectable for tests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace kcache::client {

class CircuitBreaker {
 public:
  using Clock = std::function<std::int64_t()>;  // monotonic milliseconds

  CircuitBreaker(int threshold, int cooldown_ms, Clock clock = {});

  // True when a call may go to the server now.
  bool allow();
  void on_success();
  void on_failure();

  enum class State { closed, open, half_open };
  State state() const;
  static const char* state_name(State s);

 private:
  std::int64_t now() const;

  int threshold_;
  int cooldown_ms_;
  Clock clock_;
  std::atomic<int> failures_{0};
  // While open: the time the cool-down ends. A probe moves it forward by a
  // cool-down (so only one caller probes); success sets it back to 0.
  std::atomic<std::int64_t> open_until_{0};
};

}  // namespace kcache::client
