#include "storage/redis/index.hpp"

#include <algorithm>

#include "redis/reply.hpp"
#include "storage/entry_query.hpp"
#include "storage/redis/entry_reply.hpp"
#include "storage/redis/scripts.hpp"

namespace kcache::storage::redisdb {

using redis::Args;
using redis::num;
using redis::RedisLink;
using redis::str;

Status backfill_key_order(RedisLink& link, const KeyScheme& ks) {
  auto r = link.pipeline({{"ZCARD", ks.keys()}, {"ZCARD", ks.lru()}});
  if (!r) return r.error();
  const std::int64_t have = num((*r)[0].get()), want = num((*r)[1].get());
  constexpr std::int64_t k_batch = 1000;
  for (std::int64_t at = 0; have < want && at < want; at += k_batch) {
    auto members = link.command({"ZRANGE", ks.lru(), std::to_string(at), std::to_string(at + k_batch - 1)});
    if (!members) return members.error();
    if ((*members)->elements == 0) break;
    std::vector<std::string> words;
    for (std::size_t i = 0; i < (*members)->elements; ++i) words.push_back(str((*members)->element[i]));
    Args zadd = {"ZADD", ks.keys(), "NX"};
    for (const auto& m : words) {
      zadd.push_back("0");
      zadd.push_back(m);
    }
    if (auto a = link.command(zadd); !a) return a.error();
  }
  return Ok{};
}

Result<ListPage> page_by_key(RedisLink& link, const KeyScheme& ks, const ListQuery& q) {
  auto cursor = parse_list_cursor(q);
  if (!cursor) return cursor.error();
  const ListOrder order = list_order(q, *cursor);
  const std::size_t want = q.limit + 1;
  const std::size_t batch = std::clamp<std::size_t>(want, 64, 1024);  // a page without filters: one batch
  std::string from = *cursor ? "(" + (*cursor)->key : (q.descending ? "+" : "-");
  const std::string to = q.descending ? "-" : "+", count = std::to_string(batch);
  std::vector<Entry> page;
  std::uint64_t copied = 0;
  while (page.size() < want) {
    Args z = {"ZRANGE", ks.keys(), from, to, "BYLEX"};
    if (q.descending) z.push_back("REV");
    for (const char* w : {"LIMIT", "0"}) z.push_back(w);
    z.push_back(count);
    auto members = link.command(z);
    if (!members) return members.error();
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < (*members)->elements; ++i) keys.push_back(str((*members)->element[i]));
    if (keys.empty()) break;
    auto entries = entries_of(link, ks, keys);
    if (!entries) return entries.error();
    copied += entries->size();
    for (Entry& e : *entries) {
      if (page.size() < want && matches(e, q)) page.push_back(std::move(e));
    }
    if (keys.size() < batch) break;
    from = "(" + keys.back();
  }
  note_entries_copied(copied);
  return finish_page(std::move(page), q, order);
}

Result<std::vector<Entry>> all_entries(RedisLink& link, const KeyScheme& ks) {
  auto members = link.command({"ZRANGE", ks.lru(), "0", "-1"});
  if (!members) return members.error();
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < (*members)->elements; ++i) keys.push_back(str((*members)->element[i]));
  return entries_of(link, ks, keys);
}

Result<std::vector<Entry>> entries_of(RedisLink& link, const KeyScheme& ks, const std::vector<std::string>& keys) {
  std::vector<Entry> out;
  constexpr std::size_t k_batch = 512;
  for (std::size_t start = 0; start < keys.size(); start += k_batch) {
    std::vector<std::string> mks;
    std::vector<Args> cmds;
    std::size_t end = std::min(keys.size(), start + k_batch);
    for (std::size_t i = start; i < end; ++i) mks.push_back(ks.meta(keys[i]));
    for (const auto& mk : mks) {
      Args a = {"HMGET", mk};
      for (const char* f : redisdb::k_meta_fields) a.push_back(f);
      cmds.push_back(std::move(a));
    }
    auto r = link.pipeline(cmds);  // a Cluster splits it per node
    if (!r) return r.error();
    for (std::size_t i = start; i < end; ++i) {
      const redisReply* m = (*r)[i - start].get();
      if (m->element[0]->type == REDIS_REPLY_NIL) {
        auto gone = link.command(
            {"EVAL", k_index_remove_script, "4", ks.lru(), ks.sizes(), ks.usage(), ks.keys(), keys[i]});
        if (!gone) return gone.error();
        continue;
      }
      out.push_back(parse_entry(keys[i], m, 0));
    }
  }
  return out;
}

}  // namespace kcache::storage::redisdb
