// CircuitBreaker state machine and the retry backoff, on a fake clock.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "client/circuit_breaker.hpp"
#include "client/retry.hpp"

namespace kcache::client {
namespace {

using State = CircuitBreaker::State;

struct FakeClock {
  std::int64_t now = 1000;
  CircuitBreaker::Clock fn() {
    return [this] { return now; };
  }
};

TEST(CircuitBreaker, OpensAfterThresholdConsecutiveFailures) {
  FakeClock clock;
  CircuitBreaker b(3, 10000, clock.fn());
  EXPECT_EQ(b.state(), State::closed);
  b.on_failure();
  b.on_failure();
  EXPECT_TRUE(b.allow());
  b.on_success();  // resets the streak
  b.on_failure();
  b.on_failure();
  EXPECT_EQ(b.state(), State::closed);
  b.on_failure();
  EXPECT_EQ(b.state(), State::open);
  EXPECT_FALSE(b.allow());
  clock.now += 9999;
  EXPECT_FALSE(b.allow());
}

TEST(CircuitBreaker, HalfOpenLetsExactlyOneProbeThrough) {
  FakeClock clock;
  CircuitBreaker b(2, 5000, clock.fn());
  b.on_failure();
  b.on_failure();
  clock.now += 5000;
  EXPECT_EQ(b.state(), State::half_open);
  EXPECT_TRUE(b.allow());   // the probe
  EXPECT_FALSE(b.allow());  // everyone else still skips
  EXPECT_FALSE(b.allow());
  b.on_failure();  // probe failed: open for another cool-down
  EXPECT_EQ(b.state(), State::open);
  clock.now += 4999;
  EXPECT_FALSE(b.allow());
  clock.now += 1;
  EXPECT_TRUE(b.allow());
  b.on_success();  // probe succeeded: closed
  EXPECT_EQ(b.state(), State::closed);
  EXPECT_TRUE(b.allow());
  EXPECT_TRUE(b.allow());
}

TEST(CircuitBreaker, ConcurrentProbersOnlyOneWins) {
  FakeClock clock;
  CircuitBreaker b(1, 100, clock.fn());
  b.on_failure();
  clock.now += 100;
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&] {
      if (b.allow()) allowed.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1);
}

TEST(CircuitBreaker, StateNames) {
  EXPECT_STREQ(CircuitBreaker::state_name(State::closed), "closed");
  EXPECT_STREQ(CircuitBreaker::state_name(State::open), "open");
  EXPECT_STREQ(CircuitBreaker::state_name(State::half_open), "half_open");
}

TEST(Retry, BackoffIsExponentialJitteredAndCapped) {
  RetryPolicy p{3, 100, 1000};
  for (int i = 0; i < 200; ++i) {
    auto b0 = backoff(p, 0).count();
    auto b1 = backoff(p, 1).count();
    auto b5 = backoff(p, 5).count();
    EXPECT_GE(b0, 50);
    EXPECT_LT(b0, 150);
    EXPECT_GE(b1, 100);
    EXPECT_LT(b1, 300);
    EXPECT_GE(b5, 500);  // capped at 1000 before jitter
    EXPECT_LT(b5, 1500);
  }
  // Jitter: not every wait is the same.
  std::vector<long> seen;
  for (int i = 0; i < 20; ++i) seen.push_back(backoff(p, 2).count());
  EXPECT_NE(*std::min_element(seen.begin(), seen.end()),
            *std::max_element(seen.begin(), seen.end()));
}

TEST(Retry, WhatIsRetried) {
  EXPECT_TRUE(is_retryable_error(make_error(Errc::unavailable, "refused")));
  EXPECT_FALSE(is_retryable_error(make_error(Errc::timeout, "slow")));
  EXPECT_FALSE(is_retryable_error(make_error(Errc::too_large, "big")));
  EXPECT_TRUE(is_retryable_status(503));
  EXPECT_TRUE(is_retryable_status(502));
  EXPECT_TRUE(is_retryable_status(504));
  EXPECT_FALSE(is_retryable_status(500));
  EXPECT_FALSE(is_retryable_status(404));
}

}  // namespace
}  // namespace kcache::client
