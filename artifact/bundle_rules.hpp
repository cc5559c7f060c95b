// Validity rules shared by the bundle writer and reader: what a section name,
// a cache key and a manifest may look like. Internal to artifact/.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "artifact/bundle_format.hpp"
#include "common/result.hpp"

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

// The manifest's JSON text: an object, not too deep, with a 64-hex "key".
// Parsing is iterative in nlohmann::json and exceptions are off, so hostile
// text yields a discarded value, not a throw or deep recursion.
inline Result<nlohmann::json> parse_manifest(std::span<const std::uint8_t> text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(Errc::corrupt, "manifest is not valid JSON");
  if (!j.is_object()) return make_error(Errc::corrupt, "manifest is not a JSON object");
  if (!depth_at_most(j, k_max_manifest_depth)) return make_error(Errc::corrupt, "manifest nests too deeply");
  auto key = j.find("key");
  if (key == j.end() || !key->is_string() || !is_lower_hex64(key->get_ref<const std::string&>())) {
    return make_error(Errc::corrupt, "manifest has no 64-hex \"key\"");
  }
  return j;
}

}  // namespace kcache::artifact::detail
