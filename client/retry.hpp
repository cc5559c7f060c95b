// Jittered exponential backoff and the rule for which failures are retried.
//
// Only idempotent requests are retried (GET, HEAD, DELETE of a lease, and PUT:
// first writer wins, so a repeated upload of the same bytes changes nothing).
// A failure is retried when a new attempt can plausibly succeed at once: the
// connection could not be made or was dropped, or the server answered
// 502/503/504. A timeout is not retried: a server that is slow now is slow
// for the next attempt too, and the job is better off compiling locally.
// Thread safety: backoff() is reentrant (per-thread generator).
#pragma once

#include <chrono>
#include <optional>

#include "common/result.hpp"

namespace kcache::client {

struct RetryPolicy {
  int retries = 2;    // extra attempts after the first
  int base_ms = 50;   // attempt n waits base * 2^n, jittered
  int max_ms = 2000;  // cap on one wait
};

// The wait before retry number `attempt` (0 for the first retry):
// min(max_ms, base_ms * 2^attempt) × a uniform factor in [0.5, 1.5).
std::chrono::milliseconds backoff(const RetryPolicy& policy, int attempt);

// Whether a transport failure (an Error from HttpClient::send) is retryable.
bool is_retryable_error(const Error& e);
// Whether an HTTP status is a transient server failure worth retrying.
bool is_retryable_status(int status);

}  // namespace kcache::client
