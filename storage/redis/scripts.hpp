// The Lua scripts of the redis backend (key scheme: storage/redis/backend.hpp).
//
// Entry scripts take KEYS[1] = <prefix>{<hex>}:meta and derive the entry's
// other keys from it (dropping its "meta"), so they touch only keys of that
// one hash tag (one Cluster slot) and of its prefix
// (storage/redis/key_scheme.hpp). Index scripts take the four
// <prefix>{index}:* keys.
// Scripts run atomically, which is what makes publish-if-absent, the
// all-chunks read and the index's counters race-free. The scripts avoid
// multi-key commands where they can: while a Cluster migrates a slot, Redis
// refuses a multi-key command on it unless every key is present.
#pragma once

namespace kcache::storage::redisdb {

// The meta fields, in the order reads ask for them. "pinned" ("1" or "0",
// set_pinned) came later and is written only by a pin: absent is unpinned.
inline constexpr const char* k_meta_fields[] = {
    "size", "sha256", "chunks", "created_ms", "last_access_ms", "hits",
    "label", "target", "mode", "dtype", "toolchain", "compile_ms", "pinned"};
inline constexpr int k_meta_field_count = 13;

// ARGV: token, chunk count, then field/value pairs for the meta hash.
// Returns 1 stored, 0 already present (temps dropped), -1 a temp chunk expired.
inline constexpr const char* k_publish_script = R"lua(
local prefix = string.sub(KEYS[1], 1, -5)
local tmp = prefix .. 'tmp:' .. ARGV[1] .. ':'
local n = tonumber(ARGV[2])
local function drop() for i = 0, n - 1 do redis.call('DEL', tmp .. i) end end
if redis.call('EXISTS', KEYS[1]) == 1 then drop() return 0 end
for i = 0, n - 1 do
  if redis.call('EXISTS', tmp .. i) == 0 then drop() return -1 end
end
for i = 0, n - 1 do
  local dst = prefix .. 'chunk:' .. i
  local renamed = redis.pcall('RENAME', tmp .. i, dst)
  if type(renamed) == 'table' and renamed.err then
    -- RENAME refused: a Cluster migrating this slot answers TRYAGAIN to a
    -- two-key command whose destination is absent. Move the bytes with
    -- one-key commands instead (they pass through Lua: slower, but rare).
    redis.call('SET', dst, redis.call('GET', tmp .. i))
    redis.call('DEL', tmp .. i)
  end
  redis.call('PERSIST', dst)
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
return 1
)lua";

// Counts a hit if the entry exists. ARGV: now ms. (Reads do not go through
// Lua: converting megabytes to Lua strings and back costs Redis ~150 us per
// 100 KB; reads use MULTI/EXEC and the SHA-256 check instead.)
inline constexpr const char* k_touch_script = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'hits', 1)
redis.call('HSET', KEYS[1], 'last_access_ms', ARGV[1])
return 1
)lua";

// ARGV: the sha256 the caller saw, or "" for any; "1" to spare a pinned
// entry (eviction), "0" not to (remove, corruption). Deletes meta and
// chunks. Returns the size, -1 if absent (or replaced by an entry with
// another sha), -2 if spared because pinned: the pin is checked in the same
// atomic step as the delete, so a pin set after eviction chose the entry
// still holds.
inline constexpr const char* k_delete_script = R"lua(
local m = redis.call('HMGET', KEYS[1], 'chunks', 'size', 'sha256', 'pinned')
if not m[1] then return -1 end
if ARGV[1] ~= '' and m[3] ~= ARGV[1] then return -1 end
if ARGV[2] == '1' and m[4] == '1' then return -2 end
local prefix = string.sub(KEYS[1], 1, -5)
for i = 0, tonumber(m[1]) - 1 do redis.call('DEL', prefix .. 'chunk:' .. i) end
redis.call('DEL', KEYS[1])
return tonumber(m[2])
)lua";

// Pins ("1") or unpins ("0") the entry if it exists. ARGV: "1" or "0".
// Returns 1, or 0 if absent.
inline constexpr const char* k_pin_script = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'pinned', ARGV[1])
return 1
)lua";

// KEYS: lru zset, sizes hash, usage hash, keys zset (every member at
// score 0: the key order list() pages by). ARGV: hex, score, size. The keys
// zset is written whether or not the entry was indexed already, so an
// index from before it existed fills in as entries are re-indexed.
inline constexpr const char* k_index_add_script = R"lua(
redis.call('ZADD', KEYS[4], 'NX', 0, ARGV[1])
if redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  redis.call('HINCRBY', KEYS[3], 'entries', 1)
  redis.call('HINCRBY', KEYS[3], 'bytes', ARGV[3])
  return 1
end
return 0
)lua";

// KEYS: as above. ARGV: hex.
inline constexpr const char* k_index_remove_script = R"lua(
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local size = redis.call('HGET', KEYS[2], ARGV[1]) or '0'
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'entries', -1)
  redis.call('HINCRBY', KEYS[3], 'bytes', -tonumber(size))
  return 1
end
return 0
)lua";

}  // namespace kcache::storage::redisdb
