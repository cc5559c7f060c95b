// Redis Cluster hash slots: which of the 16384 slots a key lives in, and
// which argument of a command is its first key.
//
// key_slot() is Redis's own rule: CRC16 (XMODEM) of the key modulo 16384,
// where a key holding "{...}" with at least one character between the first
// '{' and the next '}' hashes only that part (the hash tag). So
// kcache:{<hex>}:meta and kcache:{<hex>}:chunk:3 share a slot.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "redis/pool.hpp"

namespace kcache::redis {

inline constexpr int k_slot_count = 16384;

std::uint16_t crc16(std::string_view bytes);
int key_slot(std::string_view key);

// The command's first key, or nullopt for a command without one (PING,
// PUBLISH, MULTI, EXEC, EVAL with no keys ...). Knows EVAL/EVALSHA (key after
// numkeys); otherwise the key is the first argument.
std::optional<std::string_view> first_key(const Args& args);

}  // namespace kcache::redis
