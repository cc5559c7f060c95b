#include "storage/redis/entry_reply.hpp"

#include "redis/reply.hpp"

namespace kcache::storage::redisdb {

using kcache::redis::exec_reply;
using kcache::redis::num;
using kcache::redis::str;

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
  e.pinned = num(f(12)) == 1;  // nil (never pinned) reads 0
  return e;
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

}  // namespace kcache::storage::redisdb
