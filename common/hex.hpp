// Lowercase hex encoding and strict decoding.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kcache {

std::string to_hex(std::span<const std::uint8_t> bytes);
// Accepts lowercase hex only, even length; anything else is nullopt.
std::optional<std::vector<std::uint8_t>> from_hex(std::string_view text);

}  // namespace kcache
