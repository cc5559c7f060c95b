#include "storage/redis_reply.hpp"

#include <cstdlib>

namespace kcache::storage::redis {

std::string str(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return std::string(r->str, r->len);
}

std::int64_t num(const redisReply* r) {
  if (r != nullptr && r->type == REDIS_REPLY_INTEGER) return r->integer;
  std::string s = str(r);
  return s.empty() ? 0 : std::strtoll(s.c_str(), nullptr, 10);
}

Entry parse_entry(const std::string& hex, const redisReply* r, std::size_t first) {
  auto f = [&](int i) { return r->element[first + static_cast<std::size_t>(i)]; };
  Entry e;
  e.key = hex;
  e.size = static_cast<std::uint64_t>(num(f(0)));
  e.created_ms = num(f(3));
  e.last_access_ms = num(f(4));
  e.hits = static_cast<std::uint64_t>(num(f(5)));
  e.meta.label = str(f(6));
  e.meta.target = str(f(7));
  e.meta.mode = str(f(8));
  e.meta.dtype = str(f(9));
  e.meta.toolchain = str(f(10));
  e.meta.compile_ms = static_cast<std::uint64_t>(num(f(11)));
  return e;
}

Result<const redisReply*> exec_reply(const redisReply* r, std::size_t elements) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != elements) {
    return make_error(Errc::internal, "redis: bad EXEC reply");
  }
  return r;
}

Result<const redisReply*> exec_of_meta_read(const redisReply* r) {
  auto tx = exec_reply(r, 2);
  if (!tx) return tx.error();
  const redisReply* m = (*tx)->element[0];
  if (m->type != REDIS_REPLY_ARRAY || m->elements == 0 || m->element[0]->type == REDIS_REPLY_NIL) {
    return make_error(Errc::not_found, "no such object");
  }
  return tx;
}

}  // namespace kcache::storage::redis
