// POST /v1/cold-start: a rank's report of its cold start without waiting
// (docs/cold-start.md, docs/protocol.md). A rank's blocks run eagerly while
// its compile worker builds their regions; only the rank knows how many
// calls ran eagerly and when a region switched, so it sends the increments
// here and the server adds them to its counters (kcache_eager_block_calls_total
// and the others, server/metrics.cpp). Counters only: nothing is stored.
#include <cmath>

#include <nlohmann/json.hpp>

#include "server/http/handlers.hpp"

namespace kcache::server {

namespace {

constexpr std::size_t k_max_body = 4096;
constexpr double k_max_count = 1e12;  // per report; more is a broken client
constexpr double k_max_seconds = 1e9;

}  // namespace

Response handle_cold_start(Services& s, const Request& req) {
  if (req.body.size() > k_max_body) {
    return error_response(400, "bad_report", "a cold-start report is a JSON object of at most 4096 bytes");
  }
  auto j = nlohmann::json::parse(req.body.begin(), req.body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return error_response(400, "bad_report", "the body must be a JSON object");
  }
  struct Field {
    const char* name;
    std::atomic<std::uint64_t>* counter;
    double scale;  // seconds are kept as milliseconds
    double max;
  };
  const Field fields[] = {
      {"eager_block_calls", &s.metrics.eager_block_calls, 1, k_max_count},
      {"regions_switched", &s.metrics.regions_switched, 1, k_max_count},
      {"background_refusals", &s.metrics.background_refusals, 1, k_max_count},
      {"background_faults", &s.metrics.background_faults, 1, k_max_count},
      {"background_compile_seconds", &s.metrics.background_compile_ms, 1000, k_max_seconds},
  };
  // Checked whole before anything is added: a bad report changes nothing.
  std::vector<std::pair<std::atomic<std::uint64_t>*, std::uint64_t>> adds;
  for (const auto& item : j.items()) {
    const Field* f = nullptr;
    for (const auto& candidate : fields) {
      if (item.key() == candidate.name) f = &candidate;
    }
    if (f == nullptr) {
      return error_response(400, "bad_report", "unknown field '" + item.key().substr(0, 64) + "'");
    }
    const auto& v = item.value();
    bool whole = f->scale == 1;
    if (!v.is_number() || (whole && !v.is_number_unsigned())) {
      return error_response(400, "bad_report", std::string("'") + f->name + "' must be a " +
                                                   (whole ? "whole number" : "number") + " of at least 0");
    }
    double x = v.get<double>();
    if (!std::isfinite(x) || x < 0 || x > f->max) {
      return error_response(400, "bad_report", std::string("'") + f->name + "' is out of range");
    }
    adds.emplace_back(f->counter, static_cast<std::uint64_t>(std::llround(x * f->scale)));
  }
  for (auto& [counter, n] : adds) counter->fetch_add(n, std::memory_order_relaxed);
  Response r;
  r.status = 204;
  return r;
}

}  // namespace kcache::server
