// ServerApi: the kcache-server routes the client uses (docs/protocol.md),
// with retries for idempotent calls and the circuit breaker around all.
//
// Contract: every method returns a typed answer or an Error; an Error means
// "the server failed us" (unreachable, timed out, breaker open, 5xx, or an
// answer the protocol does not allow) and the caller falls back to local
// work. Transport failures and 5xx answers count against the breaker; any
// other answer resets it.
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/circuit_breaker.hpp"
#include "client/http_client.hpp"
#include "client/retry.hpp"
#include "common/result.hpp"

namespace kcache::client {

struct LeaseAnswer {
  enum class Kind { granted, held, exists } kind = Kind::held;
  std::string token;     // granted
  int ttl_ms = 0;        // granted
  int remaining_ms = 0;  // held
};

enum class RenewAnswer { renewed, lost };

class ServerApi {
 public:
  ServerApi(std::unique_ptr<HttpClient> http, RetryPolicy retry,
            std::shared_ptr<CircuitBreaker> breaker, std::string token, std::string client_name,
            std::string ns = {});

  // nullopt: 404. wait_ms > 0 long-polls while a lease on the key is live.
  Result<std::optional<std::vector<std::uint8_t>>> get(std::string_view key, int wait_ms = 0);
  Result<LeaseAnswer> acquire(std::string_view key);
  Result<RenewAnswer> renew(std::string_view key, const std::string& lease);
  Status release(std::string_view key, const std::string& lease);
  // true: stored now (201); false: already present (200).
  Result<bool> put(std::string_view key, std::span<const std::uint8_t> bundle,
                   const std::string& lease);

  // POST /v1/cold-start: counters a rank adds to the server's (a JSON object).
  Status report_cold_start(const std::string& json);

  HttpClient& http() { return *http_; }

 private:
  Result<HttpResponse> call(HttpRequest request, bool idempotent, int extra_ms = 0);
  Error unexpected(const HttpResponse& r, const std::string& what) const;

  std::unique_ptr<HttpClient> http_;
  RetryPolicy retry_;
  std::shared_ptr<CircuitBreaker> breaker_;
  std::string auth_;  // "Bearer …" or empty; never logged
  std::string client_name_;
  std::string ns_;  // X-Kcache-Namespace; empty: not sent
};

}  // namespace kcache::client
