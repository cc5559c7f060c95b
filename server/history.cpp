#include "server/history.hpp"

namespace kcache::server {

namespace {
constexpr std::int64_t k_minute_ms = 60'000;
}

History::Bucket& History::bucket(Ring& r, std::int64_t now_ms) {
  const std::int64_t minute = now_ms / k_minute_ms;
  Bucket& b = r.buckets[static_cast<std::size_t>(minute % static_cast<std::int64_t>(k_minutes))];
  if (b.minute != minute) b = Bucket{minute, 0, 0, 0};
  return b;
}

void History::hit(const std::string& ns, std::uint64_t compile_ms, std::int64_t now_ms) {
  std::lock_guard lock(mu_);
  Bucket& b = bucket(rings_[ns], now_ms);
  ++b.hits;
  b.saved_ms += compile_ms;
}

void History::miss(const std::string& ns, const std::string& key, std::int64_t now_ms) {
  std::lock_guard lock(mu_);
  Ring& r = rings_[ns];
  ++bucket(r, now_ms).misses;
  r.misses.push_front(Miss{key, now_ms, {}});
  if (r.misses.size() > k_recent_misses) r.misses.pop_back();
}

History::Series History::series(const std::string& ns, std::int64_t now_ms) const {
  Series s;
  const std::int64_t now_minute = now_ms / k_minute_ms;
  const std::int64_t first = now_minute - static_cast<std::int64_t>(k_minutes) + 1;
  s.start_ms = first * k_minute_ms;
  s.hits.assign(k_minutes, 0);
  s.misses.assign(k_minutes, 0);
  s.compile_s_saved.assign(k_minutes, 0.0);
  std::lock_guard lock(mu_);
  auto it = rings_.find(ns);
  if (it == rings_.end()) return s;
  for (const auto& b : it->second.buckets) {
    if (b.minute < first || b.minute > now_minute) continue;
    const auto i = static_cast<std::size_t>(b.minute - first);
    s.hits[i] = b.hits;
    s.misses[i] = b.misses;
    s.compile_s_saved[i] = static_cast<double>(b.saved_ms) / 1000.0;
  }
  return s;
}

std::vector<History::Miss> History::recent_misses(const std::string& ns) const {
  std::lock_guard lock(mu_);
  auto it = rings_.find(ns);
  if (it == rings_.end()) return {};
  return {it->second.misses.begin(), it->second.misses.end()};
}

bool History::awaits_explanation(const std::string& ns, const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = rings_.find(ns);
  if (it == rings_.end()) return false;
  for (const auto& m : it->second.misses) {
    if (m.key == key && m.explanation.empty()) return true;
  }
  return false;
}

void History::explain_miss(const std::string& ns, const std::string& key, std::string explanation) {
  std::lock_guard lock(mu_);
  auto it = rings_.find(ns);
  if (it == rings_.end()) return;
  for (auto& m : it->second.misses) {
    if (m.key == key && m.explanation.empty()) m.explanation = explanation;
  }
}

void History::remember_cost(const std::string& scoped_key, std::uint64_t compile_ms) {
  std::lock_guard lock(mu_);
  if (costs_.size() >= k_max_costs) costs_.clear();
  costs_[scoped_key] = compile_ms;
}

std::optional<std::uint64_t> History::cost(const std::string& scoped_key) const {
  std::lock_guard lock(mu_);
  auto it = costs_.find(scoped_key);
  if (it == costs_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kcache::server
