#include "storage/redis/key_scheme.hpp"

#include <cctype>

#include "keys/cache_key.hpp"

namespace kcache::storage::redisdb {

Status check_key_prefix(const std::string& prefix) {
  auto bad = [&](const std::string& why) {
    return make_error(Errc::invalid_argument, "redis key prefix '" + prefix + "' " + why);
  };
  if (prefix.empty() || prefix.back() != ':') return bad("must be non-empty and end with ':'");
  for (char c : prefix) {
    if (c == '{' || c == '}' || c == '*' || c == '?' || c == '[' || std::isspace(static_cast<unsigned char>(c))) {
      return bad("must hold no '{', '}', '*', '?', '[' or whitespace");
    }
  }
  return Ok{};
}

KeyScheme::KeyScheme(std::string prefix)
    : prefix_(std::move(prefix)),
      lru_(prefix_ + "{index}:lru"),
      sizes_(prefix_ + "{index}:sizes"),
      usage_(prefix_ + "{index}:usage"),
      keys_(prefix_ + "{index}:keys") {}

std::string KeyScheme::meta_pattern() const {
  std::string out;
  for (char c : prefix_) {
    if (c == '\\' || c == ']' || c == '^') out += '\\';  // literal in a Redis glob
    out += c;
  }
  return out + "{*}:meta";
}

std::string KeyScheme::hex_of_meta(std::string_view name) const {
  if (name.size() != prefix_.size() + 64 + 7 || name.substr(0, prefix_.size()) != prefix_) return {};
  std::string hex(name.substr(prefix_.size() + 1, 64));
  if (!keys::is_key_hex(hex) || name != meta(hex)) return {};
  return hex;
}

}  // namespace kcache::storage::redisdb
