// Hash slots (redis/slots.hpp).
#include "redis/slots.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace kcache::redis {
namespace {

bool is(std::string_view a, std::string_view upper) {
  return a.size() == upper.size() &&
         std::equal(a.begin(), a.end(), upper.begin(), [](char x, char y) { return std::toupper(x) == y; });
}

}  // namespace

std::uint16_t crc16(std::string_view bytes) {
  // CRC-16/XMODEM: polynomial 0x1021, initial 0, no reflection.
  std::uint16_t crc = 0;
  for (char ch : bytes) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(ch) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

int key_slot(std::string_view key) {
  if (auto open = key.find('{'); open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % k_slot_count;
}

std::optional<std::string_view> first_key(const Args& args) {
  if (args.empty()) return std::nullopt;
  std::string_view cmd = args[0];
  if (is(cmd, "EVAL") || is(cmd, "EVALSHA") || is(cmd, "EVAL_RO") || is(cmd, "EVALSHA_RO")) {
    if (args.size() < 4 || args[2] == "0") return std::nullopt;
    return args[3];
  }
  constexpr std::string_view k_keyless[] = {"PING", "PUBLISH", "SUBSCRIBE", "MULTI", "EXEC", "DISCARD", "ASKING",
                                            "SCAN", "INFO", "CLUSTER", "TIME", "WAIT", "AUTH", "SELECT",
                                            "FLUSHALL", "DBSIZE", "READONLY", "READWRITE"};
  for (auto k : k_keyless) {
    if (is(cmd, k)) return std::nullopt;
  }
  if (args.size() < 2) return std::nullopt;
  return args[1];
}

}  // namespace kcache::redis
