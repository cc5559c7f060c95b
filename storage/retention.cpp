#include "storage/retention.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kcache::storage {

// The formula of storage/retention.hpp, term by term; keep the two in step
// (tests/cpp/storage_retention_test.cpp checks values of it).
double entry_value(const Entry& e, std::int64_t now_ms, std::int64_t window_ms) {
  const double compile_seconds = static_cast<double>(e.meta.compile_ms) / 1000.0;
  const double age = static_cast<double>(std::max<std::int64_t>(0, now_ms - e.last_access_ms));
  const double window = static_cast<double>(std::max<std::int64_t>(1, window_ms));
  const double uses = 1.0 + static_cast<double>(e.hits);
  return compile_seconds * uses * std::exp2(-age / window) / static_cast<double>(std::max<std::uint64_t>(e.size, 1));
}

std::int64_t value_order_key(double value) {
  if (!(value > 0.0)) return 0;  // NaN, negatives and both zeros
  return std::bit_cast<std::int64_t>(value);
}

}  // namespace kcache::storage
