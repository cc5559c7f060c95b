// Reading the redis backend's replies (storage/redis_backend.cpp and its
// bounded read, storage/redis_range_read.cpp): a string or integer reply's
// value, an entry from its meta hash's k_meta_fields values, the EXEC reply
// of a MULTI ... EXEC block, and the names of an entry's keys.
// A reply of the wrong type reads as empty / 0: the callers check the
// shapes that decide anything (EXEC's element count, nil metas).
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.hpp"
#include "storage/backend.hpp"

namespace kcache::storage::redis {

// The entry's meta hash and the prefix of its chunk keys; both carry the
// hash tag {<hex>}, so one slot of a Cluster holds the whole entry.
inline std::string meta_key(const std::string& hex) { return "kcache:{" + hex + "}:meta"; }
inline std::string chunk_prefix(const std::string& hex) { return "kcache:{" + hex + "}:chunk:"; }

std::string str(const redisReply* r);
std::int64_t num(const redisReply* r);

// Entry `hex` from the k_meta_fields values at r->element[first ...].
Entry parse_entry(const std::string& hex, const redisReply* r, std::size_t first);

// The array EXEC answered, checked to hold `elements` replies (one per
// queued command); Errc::internal otherwise (an aborted transaction: nil).
Result<const redisReply*> exec_reply(const redisReply* r, std::size_t elements);

// The EXEC reply of a MULTI, HMGET <meta> ..., one more command, EXEC block
// (a read's first round trip), checked as above; Errc::not_found when the
// entry has no meta (its first field is nil).
Result<const redisReply*> exec_of_meta_read(const redisReply* r);

}  // namespace kcache::storage::redis
