// Reading hiredis replies: a string or integer reply's value and the array
// an EXEC answered. A reply of the wrong type reads as empty / 0: the
// callers check the shapes that decide anything (EXEC's element count).
// Thread safety: pure functions.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace kcache::redis {

std::string str(const redisReply* r);
std::int64_t num(const redisReply* r);

// The array EXEC answered, checked to hold `elements` replies (one per
// queued command); Errc::internal otherwise (an aborted transaction: nil).
Result<const redisReply*> exec_reply(const redisReply* r, std::size_t elements);

}  // namespace kcache::redis
