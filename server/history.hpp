// History: what the web page (GET /ui, docs/ui.md) plots — per namespace,
// hits, misses and compile seconds saved in each minute of the last day,
// and the most recent misses; plus the compile cost of entries recently
// stored or read, so that a hit can be counted as the seconds it saved.
//
// Minutes are buckets of a ring of 1440, keyed by the minute's number
// since the epoch: a bucket last written a day (or more) ago reads as zero
// and is reset on its next write. Namespaces are counted under the names
// the server resolved (configured ones only), so a client cannot grow the
// table. The cost memo holds at most k_max_costs keys and is cleared
// whole when full (a forgotten cost reads as unknown: that hit counts as a
// hit that saved 0 s, never as a wrong figure).
// Thread safety: every method may be called concurrently (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kcache::server {

class History {
 public:
  static constexpr std::size_t k_minutes = 1440;
  static constexpr std::size_t k_recent_misses = 20;
  static constexpr std::size_t k_max_costs = 200'000;

  void hit(const std::string& ns, std::uint64_t compile_ms, std::int64_t now_ms);
  void miss(const std::string& ns, const std::string& key, std::int64_t now_ms);

  struct Series {
    std::int64_t start_ms = 0;  // the first (oldest) minute's start
    std::vector<std::uint64_t> hits, misses;
    std::vector<double> compile_s_saved;
  };
  // The last k_minutes minutes, oldest first; the last is the current one.
  Series series(const std::string& ns, std::int64_t now_ms) const;
  struct Miss {
    std::string key;
    std::int64_t time_ms = 0;
    // Set once the region is uploaded (server/http/miss_explain.hpp): the
    // key fields that differ from the nearest stored entry, as JSON text.
    std::string explanation;
  };
  // Newest first.
  std::vector<Miss> recent_misses(const std::string& ns) const;
  // Whether `key` is among ns's recent misses not explained yet.
  bool awaits_explanation(const std::string& ns, const std::string& key) const;
  void explain_miss(const std::string& ns, const std::string& key, std::string explanation);

  void remember_cost(const std::string& scoped_key, std::uint64_t compile_ms);
  std::optional<std::uint64_t> cost(const std::string& scoped_key) const;

 private:
  struct Bucket {
    std::int64_t minute = -1;
    std::uint64_t hits = 0, misses = 0, saved_ms = 0;
  };
  struct Ring {
    std::array<Bucket, k_minutes> buckets{};
    std::deque<Miss> misses;  // newest first
  };
  Bucket& bucket(Ring& r, std::int64_t now_ms);  // REQUIRES: mu_ held

  mutable std::mutex mu_;
  std::map<std::string, Ring> rings_;                         // GUARDED_BY(mu_)
  std::unordered_map<std::string, std::uint64_t> costs_;      // GUARDED_BY(mu_)
};

}  // namespace kcache::server
