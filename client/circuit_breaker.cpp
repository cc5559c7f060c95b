#include "client/circuit_breaker.hpp"

namespace kcache::client {

CircuitBreaker::CircuitBreaker(int threshold, int cooldown_ms, Clock clock)
    : threshold_(threshold < 1 ? 1 : threshold),
      cooldown_ms_(cooldown_ms < 0 ? 0 : cooldown_ms),
      clock_(std::move(clock)) {}

std::int64_t CircuitBreaker::now() const {
  if (clock_) return clock_();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool CircuitBreaker::allow() {
  if (failures_.load() < threshold_) return true;
  std::int64_t until = open_until_.load();
  std::int64_t t = now();
  if (t < until) return false;
  // Half-open: the caller that moves the deadline forward is the probe.
  return open_until_.compare_exchange_strong(until, t + cooldown_ms_);
}

void CircuitBreaker::on_success() {
  failures_.store(0);
  open_until_.store(0);
}

void CircuitBreaker::on_failure() {
  int n = failures_.fetch_add(1) + 1;
  if (n >= threshold_) open_until_.store(now() + cooldown_ms_);
}

CircuitBreaker::State CircuitBreaker::state() const {
  if (failures_.load() < threshold_) return State::closed;
  return now() < open_until_.load() ? State::open : State::half_open;
}

const char* CircuitBreaker::state_name(State s) {
  switch (s) {
    case State::closed: return "closed";
    case State::open: return "open";
    case State::half_open: return "half_open";
  }
  return "closed";
}

}  // namespace kcache::client
