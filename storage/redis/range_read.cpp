#include "storage/redis/range_read.hpp"

#include <algorithm>

#include "redis/reply.hpp"
#include "storage/redis/entry_reply.hpp"

namespace kcache::storage::redisdb {

using redis::Args;
using redis::exec_reply;
using redis::num;
using redis::RedisLink;
using redis::str;

Result<std::vector<std::uint8_t>> read_range_once(RedisLink& link, const KeyScheme& ks, const std::string& key,
                                                  std::uint64_t offset, std::uint64_t length, bool& replaced) {
  using Bytes = std::vector<std::uint8_t>;
  std::string mk = ks.meta(key), prefix = ks.chunk_prefix(key);
  auto r = link.pipeline({{"MULTI"}, {"HMGET", mk, "size", "chunks", "created_ms"}, {"STRLEN", prefix + "0"}, {"EXEC"}});
  if (!r) return r.error();
  auto exec = exec_of_meta_read((*r)[3].get());
  if (!exec) return exec.error();
  const redisReply* tx = *exec;
  const redisReply* m = tx->element[0];
  auto size = static_cast<std::uint64_t>(num(m->element[0]));
  auto chunks = static_cast<std::uint64_t>(num(m->element[1]));
  std::string created = str(m->element[2]);
  auto first_len = static_cast<std::uint64_t>(num(tx->element[1]));
  std::uint64_t c = chunks > 1 ? first_len : size;
  bool shape_ok = chunks == 0 ? size == 0
                              : first_len == (chunks > 1 ? c : size) && c > 0 && (chunks - 1) * c < size &&
                                    size <= chunks * c;
  if (!shape_ok) {
    return make_error(Errc::corrupt, "object " + key + ": its chunks do not add up to its size (" +
                                         std::to_string(size) + " bytes in " + std::to_string(chunks) +
                                         " chunks, the first " + std::to_string(first_len) +
                                         " bytes; a chunk missing?)");
  }
  if (offset >= size || length == 0) return Bytes{};
  std::uint64_t end = offset + std::min(length, size - offset);  // exclusive
  std::vector<std::string> words;  // Args are views: the names and bounds live here
  for (std::uint64_t i = offset / c; i * c < end; ++i) {
    std::uint64_t from = std::max(offset, i * c) - i * c, to = std::min(end, (i + 1) * c) - i * c;  // in chunk i
    words.push_back(prefix + std::to_string(i));
    words.push_back(std::to_string(from));
    words.push_back(std::to_string(to - 1));
  }
  std::vector<Args> cmds = {{"MULTI"}, {"HGET", mk, "created_ms"}};
  for (std::size_t w = 0; w < words.size(); w += 3) cmds.push_back({"GETRANGE", words[w], words[w + 1], words[w + 2]});
  cmds.push_back({"EXEC"});
  auto rr = link.pipeline(cmds);
  if (!rr) return rr.error();
  auto exec2 = exec_reply(rr->back().get(), cmds.size() - 2);
  if (!exec2) return exec2.error();
  const redisReply* tx2 = *exec2;
  if (str(tx2->element[0]) != created) {
    replaced = true;
    return Bytes{};
  }
  Bytes out;
  out.reserve(static_cast<std::size_t>(end - offset));
  for (std::size_t j = 1; j < tx2->elements; ++j) {
    const redisReply* part = tx2->element[j];
    if (part->type != REDIS_REPLY_STRING) return make_error(Errc::internal, "redis: bad GETRANGE reply");
    out.insert(out.end(), part->str, part->str + part->len);
  }
  if (out.size() != end - offset) {
    return make_error(Errc::corrupt, "object " + key + ": a chunk is missing or short (evicted by Redis maxmemory?)");
  }
  return out;
}

}  // namespace kcache::storage::redisdb
