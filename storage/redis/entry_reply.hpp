// Reading the redis backend's entries (storage/redis/backend.cpp and its
// bounded read, storage/redis/range_read.cpp): an entry from its meta
// hash's k_meta_fields values, and the EXEC reply of a meta read;
// redis/reply.hpp reads the values themselves, storage/redis/key_scheme.hpp
// names the keys.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.hpp"
#include "storage/backend.hpp"

namespace kcache::storage::redisdb {

// Entry `hex` from the k_meta_fields values at r->element[first ...].
Entry parse_entry(const std::string& hex, const redisReply* r, std::size_t first);

// The EXEC reply of a MULTI, HMGET <meta> ..., one more command, EXEC block
// (a read's first round trip), checked as above; Errc::not_found when the
// entry has no meta (its first field is nil).
Result<const redisReply*> exec_of_meta_read(const redisReply* r);

}  // namespace kcache::storage::redisdb
