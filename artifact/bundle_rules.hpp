// Validity rules shared by the bundle writer and reader: what a section name,
// a cache key and a manifest may look like. Internal to artifact/.
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "artifact/bundle_format.hpp"

namespace kcache::artifact::detail {

inline bool is_valid_section_name(std::string_view name) {
  if (name.empty() || name.size() > k_max_section_name) return false;
  for (char c : name) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

inline bool is_lower_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Recursion is bounded by `limit`, so this is safe on any tree.
inline bool depth_at_most(const nlohmann::json& j, int limit) {
  if (!j.is_structured()) return true;
  if (limit <= 0) return false;
  for (const auto& child : j) {
    if (!depth_at_most(child, limit - 1)) return false;
  }
  return true;
}

}  // namespace kcache::artifact::detail
