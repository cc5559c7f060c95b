#include "redis/reply.hpp"

#include <cstdlib>

namespace kcache::redis {

std::string str(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return std::string(r->str, r->len);
}

std::int64_t num(const redisReply* r) {
  if (r != nullptr && r->type == REDIS_REPLY_INTEGER) return r->integer;
  std::string s = str(r);
  return s.empty() ? 0 : std::strtoll(s.c_str(), nullptr, 10);
}

Result<const redisReply*> exec_reply(const redisReply* r, std::size_t elements) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != elements) {
    return make_error(Errc::internal, "redis: bad EXEC reply");
  }
  return r;
}

}  // namespace kcache::redis
