// One bounded read of a redis entry (Backend::read_range on redis:// and
// redis-cluster:// storage): the meta and chunk 0's length (the chunk size
// the writer used: every chunk but the last has it), then GETRANGE of only
// the chunks that overlap the range, in one MULTI/EXEC that re-reads
// created_ms. Every key has the entry's hash tag: one slot, one node.
// Errors: not_found (no entry); corrupt (chunks that do not add up to the
// size, or a chunk missing or short: evicted by maxmemory?); the link's.
// An entry replaced between the two round trips sets `replaced` and returns
// no bytes: the caller reads again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "redis/link.hpp"
#include "storage/redis/key_scheme.hpp"

namespace kcache::storage::redisdb {

Result<std::vector<std::uint8_t>> read_range_once(redis::RedisLink& link, const KeyScheme& ks, const std::string& key,
                                                  std::uint64_t offset, std::uint64_t length, bool& replaced);

}  // namespace kcache::storage::redisdb
