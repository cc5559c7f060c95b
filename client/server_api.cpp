#include "client/server_api.hpp"

#include <thread>

#include <nlohmann/json.hpp>

namespace kcache::client {

namespace {

std::string artifact_path(std::string_view key) {
  return "/v1/artifacts/" + std::string(key);
}
std::string lease_path(std::string_view key) {
  return "/v1/leases/" + std::string(key);
}

nlohmann::json body_json(const HttpResponse& r) {
  return nlohmann::json::parse(r.body.begin(), r.body.end(), nullptr, /*allow_exceptions=*/false);
}

int json_int(const nlohmann::json& j, const char* name, int fallback) {
  if (!j.is_object() || !j.contains(name) || !j[name].is_number()) return fallback;
  return j[name].get<int>();
}

}  // namespace

ServerApi::ServerApi(std::unique_ptr<HttpClient> http, RetryPolicy retry,
                     std::shared_ptr<CircuitBreaker> breaker, std::string token,
                     std::string client_name, std::string ns)
    : http_(std::move(http)),
      retry_(retry),
      breaker_(std::move(breaker)),
      auth_(token.empty() ? std::string() : "Bearer " + token),
      client_name_(std::move(client_name)),
      ns_(std::move(ns)) {}

Error ServerApi::unexpected(const HttpResponse& r, const std::string& what) const {
  std::string msg = what + ": HTTP " + std::to_string(r.status);
  auto j = body_json(r);
  if (j.is_object() && j.contains("error") && j["error"].is_string())
    msg += " " + j["error"].get<std::string>();
  Errc code = r.status >= 500 ? Errc::unavailable : Errc::internal;
  return make_error(code, msg);
}

Result<HttpResponse> ServerApi::call(HttpRequest request, bool idempotent, int extra_ms) {
  if (!auth_.empty()) request.headers.emplace_back("Authorization", auth_);
  if (!ns_.empty()) request.headers.emplace_back("X-Kcache-Namespace", ns_);
  for (int attempt = 0;; ++attempt) {
    if (!breaker_->allow())
      return make_error(Errc::unavailable, "server skipped: circuit breaker open");
    auto r = http_->send(request, extra_ms);
    bool failed = !r.ok() || r->status >= 500;
    if (!failed) {
      breaker_->on_success();
      return r;
    }
    breaker_->on_failure();
    bool retryable = r.ok() ? is_retryable_status(r->status) : is_retryable_error(r.error());
    if (!idempotent || !retryable || attempt >= retry_.retries) return r;
    std::this_thread::sleep_for(backoff(retry_, attempt));
  }
}

Result<std::optional<std::vector<std::uint8_t>>> ServerApi::get(std::string_view key, int wait_ms) {
  HttpRequest req{"GET", artifact_path(key), {}, {}};
  if (wait_ms > 0) req.target += "?wait_ms=" + std::to_string(wait_ms);
  auto r = call(std::move(req), /*idempotent=*/true, wait_ms);
  if (!r.ok()) return r.error();
  if (r->status == 200) return std::optional<std::vector<std::uint8_t>>(std::move(r->body));
  if (r->status == 404) return std::optional<std::vector<std::uint8_t>>();
  return unexpected(*r, "GET artifact");
}

Result<LeaseAnswer> ServerApi::acquire(std::string_view key) {
  HttpRequest req{"POST", lease_path(key), {}, {}};
  if (!client_name_.empty()) req.headers.emplace_back("X-Kcache-Client", client_name_);
  // Not retried: a lost answer to a granted POST would leave us waiting on
  // our own lease until its TTL.
  auto r = call(std::move(req), /*idempotent=*/false);
  if (!r.ok()) return r.error();
  auto j = body_json(*r);
  LeaseAnswer a;
  if (r->status == 201) {
    a.kind = LeaseAnswer::Kind::granted;
    if (j.is_object() && j.contains("lease") && j["lease"].is_string())
      a.token = j["lease"].get<std::string>();
    if (a.token.empty()) a.token = r->header("x-kcache-lease");
    if (a.token.empty()) return make_error(Errc::internal, "lease granted without a token");
    a.ttl_ms = json_int(j, "ttl_ms", 60000);
    return a;
  }
  if (r->status == 409) {
    a.kind = LeaseAnswer::Kind::held;
    a.remaining_ms = json_int(j, "remaining_ms", 0);
    return a;
  }
  if (r->status == 200) {
    a.kind = LeaseAnswer::Kind::exists;
    return a;
  }
  return unexpected(*r, "POST lease");
}

Result<RenewAnswer> ServerApi::renew(std::string_view key, const std::string& lease) {
  HttpRequest req{"POST", lease_path(key) + "/renew", {{"X-Kcache-Lease", lease}}, {}};
  auto r = call(std::move(req), /*idempotent=*/true);
  if (!r.ok()) return r.error();
  if (r->status == 200) return RenewAnswer::renewed;
  if (r->status == 409) return RenewAnswer::lost;
  return unexpected(*r, "renew lease");
}

Status ServerApi::release(std::string_view key, const std::string& lease) {
  HttpRequest req{"DELETE", lease_path(key), {{"X-Kcache-Lease", lease}}, {}};
  auto r = call(std::move(req), /*idempotent=*/true);
  if (!r.ok()) return r.error();
  if (r->status == 204 || r->status == 409) return Ok{};  // 409: already gone
  return unexpected(*r, "release lease");
}

Result<bool> ServerApi::put(std::string_view key, std::span<const std::uint8_t> bundle,
                            const std::string& lease) {
  HttpRequest req{"PUT", artifact_path(key), {{"Content-Type", "application/octet-stream"}}, {}};
  if (!lease.empty()) req.headers.emplace_back("X-Kcache-Lease", lease);
  req.body.assign(bundle.begin(), bundle.end());
  // Retried: first writer wins, so a repeated upload of these bytes is harmless.
  auto r = call(std::move(req), /*idempotent=*/true);
  if (!r.ok()) return r.error();
  if (r->status == 201) return true;
  if (r->status == 200) return false;
  return unexpected(*r, "PUT artifact");
}

Status ServerApi::report_cold_start(const std::string& json) {
  HttpRequest req{"POST", "/v1/cold-start", {{"Content-Type", "application/json"}}, {}};
  req.body.assign(json.begin(), json.end());
  // Not retried: a repeated report would count twice.
  auto r = call(std::move(req), /*idempotent=*/false);
  if (!r.ok()) return r.error();
  if (r->status == 204) return Ok{};
  return unexpected(*r, "POST cold-start report");
}

}  // namespace kcache::client
