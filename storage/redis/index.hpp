// The index of a redis store (redis:// and redis-cluster:// storage,
// storage/redis/backend.hpp): four keys under the hash tag {index}, so one
// slot of a Cluster holds them all and the index scripts
// (storage/redis/scripts.hpp: k_index_add_script, k_index_remove_script,
// whose KEYS are these four in this order) run on one node. Named by the
// store's KeyScheme (storage/redis/key_scheme.hpp), so each key prefix has
// an index of its own:
//   <prefix>{index}:lru    zset <hex> -> last access ms (LRU eviction's order)
//   <prefix>{index}:sizes  hash <hex> -> size
//   <prefix>{index}:usage  hash entries, bytes
//   <prefix>{index}:keys   zset <hex> -> 0 (key order, paged with ZRANGE BYLEX)
// Errors: the link's (unavailable, timeout).
// Thread safety: as the link; no state of its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "redis/link.hpp"
#include "storage/backend.hpp"
#include "storage/redis/key_scheme.hpp"

namespace kcache::storage::redisdb {

// A list() page in key order: batches of the keys zset after the cursor
// (REV when descending), their metas, the query's filters, until limit + 1
// entries match. A page costs what it shows plus what its filters skip, not
// the whole index (counted in kcache_storage_list_entries_copied_total).
Result<ListPage> page_by_key(redis::RedisLink& link, const KeyScheme& ks, const ListQuery& q);

// Every indexed entry's metadata, in LRU order.
Result<std::vector<Entry>> all_entries(redis::RedisLink& link, const KeyScheme& ks);

// The metadata of `keys` (indexed entries), in their order; members whose
// meta is gone are dropped from the index.
Result<std::vector<Entry>> entries_of(redis::RedisLink& link, const KeyScheme& ks,
                                      const std::vector<std::string>& keys);

// Fills the keys zset from the lru zset when it has fewer members (a store
// indexed by a kcache from before the keys zset). Idempotent (ZADD NX), so
// replicas opening at once do no harm; run when the backend opens.
Status backfill_key_order(redis::RedisLink& link, const KeyScheme& ks);

}  // namespace kcache::storage::redisdb
