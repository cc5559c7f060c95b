// parse_uint: a query-string or header number, strictly decimal.
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kcache::server {

// Decimal digits only, at most 12 of them (no sign, no spaces, no overflow);
// anything else is nullopt so that callers answer 400.
inline std::optional<std::uint64_t> parse_uint(const std::string& s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

}  // namespace kcache::server
