// The redis backend's key prefix (RedisOptions::key_prefix,
// storage/redis/key_scheme.hpp), against a real redis-server on a random
// loopback port: two prefixes on one Redis are two stores that never touch
// each other; the default prefix names keys exactly as kcache did before
// prefixes, so a store written then opens unchanged; a bad prefix is refused;
// every name keeps its hash tag as its first braces (one Cluster slot per
// entry, one for the index).
#include <gtest/gtest.h>

#include <set>

#include "redis/slots.hpp"
#include "storage/redis/backend.hpp"
#include "storage/redis/key_scheme.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

using testing::make_bytes;
using testing::make_key;
using Bytes = std::vector<std::uint8_t>;

const EntryMeta k_meta{"Blk/cpu", "cpu", "default", "f32", "tc", 7};

testing::RedisServer& server() {
  static testing::RedisServer s;
  return s;
}

std::unique_ptr<Backend> open_prefixed(const std::string& prefix) {
  auto o = parse_redis_url(server().url());
  EXPECT_TRUE(o.ok());
  o->key_prefix = prefix;
  auto b = open_redis_backend(*o);
  EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
  return b ? std::move(b.value()) : nullptr;
}

std::set<std::string> listed(Backend& b) {
  std::set<std::string> out;
  const auto page = b.list({});  // named: a range-for over a temporary's member dangles
  for (const Entry& e : page->entries) out.insert(e.key);
  return out;
}

// Every key in the Redis matching `pattern` (redis-cli --scan).
std::set<std::string> redis_keys(const std::string& pattern) {
  std::set<std::string> out;
  std::string text = server().cli("--scan --pattern '" + pattern + "'"), line;
  for (char c : text) {
    if (c != '\n') {
      line += c;
    } else if (!line.empty()) {
      out.insert(line);
      line.clear();
    }
  }
  return out;
}

TEST(RedisKeyPrefix, TwoPrefixesAreTwoStores) {
  server().cli("FLUSHALL");
  auto dflt = open_prefixed("kcache:");
  auto team = open_prefixed("kcache:ns:team-a:");
  ASSERT_TRUE(dflt && team);
  std::string only_default = make_key("d"), only_team = make_key("t"), shared = make_key("s");
  ASSERT_TRUE(dflt->put(only_default, make_bytes(100, 1), k_meta).ok());
  ASSERT_TRUE(dflt->put(shared, make_bytes(150, 2), k_meta).ok());
  ASSERT_TRUE(team->put(only_team, make_bytes(2'500'000, 3), k_meta).ok());  // three chunks
  ASSERT_TRUE(team->put(shared, make_bytes(250, 4), k_meta).ok());
  EXPECT_EQ(dflt->get(shared).value(), make_bytes(150, 2));
  EXPECT_EQ(team->get(shared).value(), make_bytes(250, 4));
  EXPECT_EQ(team->read_range(only_team, 1'048'000, 1000).value().size(), 1000u);
  EXPECT_EQ(dflt->head(only_team).error().code, Errc::not_found);
  EXPECT_EQ(team->head(only_default).error().code, Errc::not_found);
  EXPECT_EQ(listed(*dflt), (std::set<std::string>{only_default, shared}));
  EXPECT_EQ(listed(*team), (std::set<std::string>{only_team, shared}));
  EXPECT_EQ(dflt->usage()->bytes, 250u);
  EXPECT_EQ(team->usage()->bytes, 2'500'250u);
  EXPECT_EQ(team->usage()->entries, 2u);

  // The names: the default prefix's are the old ones, the team's all start
  // with its prefix, and the two sets are disjoint.
  auto team_keys = redis_keys("kcache:ns:team-a:*");
  auto all_keys = redis_keys("*");
  EXPECT_TRUE(team_keys.count("kcache:ns:team-a:{" + shared + "}:meta"));
  EXPECT_TRUE(team_keys.count("kcache:ns:team-a:{" + only_team + "}:chunk:2"));
  EXPECT_TRUE(team_keys.count("kcache:ns:team-a:{index}:lru"));
  for (const auto& k : all_keys) {
    if (team_keys.count(k)) continue;
    EXPECT_EQ(k.rfind("kcache:{", 0), 0u) << k << ": a key of neither store";
  }
  EXPECT_TRUE(all_keys.count("kcache:{" + shared + "}:meta"));
  EXPECT_TRUE(all_keys.count("kcache:{index}:keys"));

  // Pins, verify (its SCAN re-indexes by pattern), eviction and removal of one leave the other alone.
  ASSERT_TRUE(team->set_pinned(shared, true).ok());
  EXPECT_FALSE(dflt->head(shared)->pinned);
  // The team's index update of only_team lost (a crash between the publish
  // and the index script): only its verify re-adds it.
  server().cli("ZREM 'kcache:ns:team-a:{index}:lru' " + only_team);
  server().cli("ZREM 'kcache:ns:team-a:{index}:keys' " + only_team);
  server().cli("HDEL 'kcache:ns:team-a:{index}:sizes' " + only_team);
  server().cli("HINCRBY 'kcache:ns:team-a:{index}:usage' entries -1");
  server().cli("HINCRBY 'kcache:ns:team-a:{index}:usage' bytes -2500000");
  auto v = dflt->verify([](const std::string&, const Bytes&) { return false; }, /*remove=*/true);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->checked, 2u);
  EXPECT_EQ(v->removed, 2u);
  EXPECT_EQ(listed(*dflt), std::set<std::string>{});
  EXPECT_EQ(team->get(shared).value(), make_bytes(250, 4));
  auto tv = team->verify([](const std::string&, const Bytes&) { return true; }, /*remove=*/false);
  ASSERT_TRUE(tv.ok()) << tv.error().message;
  EXPECT_EQ(tv->checked, 2u) << "the team's own scan re-indexed its entry";
  EXPECT_EQ(team->usage()->bytes, 2'500'250u);
  EXPECT_EQ(dflt->usage()->entries, 0u);
  ASSERT_TRUE(dflt->put(only_default, make_bytes(100, 1), k_meta).ok());
  EvictPolicy all;
  all.max_bytes = 0;
  EXPECT_EQ(team->evict(all)->keys, std::vector<std::string>{only_team}) << "the pinned one stays";
  EXPECT_TRUE(dflt->head(only_default).ok());
  EXPECT_EQ(dflt->evict(all)->keys, std::vector<std::string>{only_default});
  EXPECT_TRUE(team->head(shared).ok());
  ASSERT_TRUE(team->remove(shared).ok());
  EXPECT_EQ(dflt->remove(shared).error().code, Errc::not_found);
  for (const auto& k : redis_keys("kcache:ns:team-a:*")) {
    EXPECT_EQ(k.rfind("kcache:ns:team-a:{index}:", 0), 0u) << k << " outlived its entry";
  }
}

// A store written by a kcache from before prefixes (and before the keys
// zset and pins), by hand with the literal old names: the default prefix
// opens and serves it as it is.
TEST(RedisKeyPrefix, DefaultPrefixReadsAStoreWithTheOldNames) {
  server().cli("FLUSHALL");
  std::string hex = make_key("old");
  std::string sha = to_hex(sha256(std::string("hello old store")));
  server().cli("HSET 'kcache:{" + hex + "}:meta' size 15 sha256 " + sha +
               " chunks 1 created_ms 1000 last_access_ms 2000 hits 3 label Old/cpu target cpu mode default"
               " dtype f32 toolchain tc-old compile_ms 1500");
  server().cli("SET 'kcache:{" + hex + "}:chunk:0' 'hello old store'");
  server().cli("ZADD 'kcache:{index}:lru' 2000 " + hex);
  server().cli("HSET 'kcache:{index}:sizes' " + hex + " 15");
  server().cli("HSET 'kcache:{index}:usage' entries 1 bytes 15");
  auto o = parse_redis_url(server().url());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->key_prefix, "kcache:") << "the default";
  auto b = open_redis_backend(*o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto& store = *b;
  auto h = store->head(hex);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->size, 15u);
  EXPECT_EQ(h->hits, 3u);
  EXPECT_EQ(h->meta.compile_ms, 1500u);
  EXPECT_EQ(h->meta.toolchain, "tc-old");
  EXPECT_FALSE(h->pinned) << "no pinned field: unpinned";
  auto got = store->get(hex);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(std::string(got->begin(), got->end()), "hello old store");
  EXPECT_EQ(listed(*store), std::set<std::string>{hex}) << "key order, from the keys zset filled at open";
  EXPECT_EQ(server().cli("ZCARD 'kcache:{index}:keys'"), "1\n");
  EXPECT_EQ(store->usage()->bytes, 15u);
  ASSERT_TRUE(store->set_pinned(hex, true).ok());
  EXPECT_EQ(server().cli("HGET 'kcache:{" + hex + "}:meta' pinned"), "1\n");
  auto v = store->verify([](const std::string&, const Bytes&) { return true; }, false);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->checked, 1u);
  EXPECT_TRUE(v->corrupt.empty());
}

TEST(RedisKeyPrefix, BadPrefixesAreRefused) {
  for (const char* bad : {"", "kcache", "kcache:{ns}:", "a}:", "a*:", "a?:", "a[b]:", "a b:", "a\t:", "a:\n"}) {
    auto o = parse_redis_url(server().url());
    ASSERT_TRUE(o.ok());
    o->key_prefix = bad;
    auto b = open_redis_backend(*o);
    ASSERT_FALSE(b.ok()) << "'" << bad << "' accepted";
    EXPECT_EQ(b.error().code, Errc::invalid_argument) << bad;
    RedisClusterOptions c;
    c.node.key_prefix = bad;
    c.seeds = {{"127.0.0.1", server().port()}};
    EXPECT_EQ(open_redis_cluster_backend(c).error().code, Errc::invalid_argument) << bad;
  }
  for (const char* good : {"kcache:", "kcache:ns:team-a:", "x:", "a\\b:", "a]^:"}) {
    EXPECT_TRUE(redisdb::check_key_prefix(good).ok()) << good;
  }
}

// The glob characters Redis's SCAN knows beyond the refused ones ('\\', ']'
// and '^') are escaped in verify's pattern: such a prefix still re-indexes
// its own entries and no other's.
TEST(RedisKeyPrefix, OddPrefixesStillScanOnlyTheirOwn) {
  server().cli("FLUSHALL");
  auto odd = open_prefixed("a\\b]^:");
  auto plain = open_prefixed("ab]^:");
  ASSERT_TRUE(odd && plain);
  std::string k = make_key("odd");
  ASSERT_TRUE(odd->put(k, make_bytes(10, 1), k_meta).ok());
  ASSERT_TRUE(plain->put(make_key("plain"), make_bytes(10, 2), k_meta).ok());
  server().cli("DEL 'a\\b]^:{index}:lru'");
  auto v = odd->verify([](const std::string&, const Bytes&) { return true; }, false);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->checked, 1u);
  EXPECT_EQ(odd->list({})->entries.size(), 1u);
  EXPECT_EQ(plain->list({})->entries.size(), 1u);
}

TEST(RedisKeyScheme, HashTagsStayTheFirstBraces) {
  std::string hex = make_key("slot");
  for (const char* p : {"kcache:", "kcache:ns:team-a:", "x:y:z:"}) {
    const std::string prefix = p;
    redisdb::KeyScheme ks(prefix);
    const int entry = redis::key_slot("{" + hex + "}"), index = redis::key_slot("{index}");
    for (const std::string& name : {ks.meta(hex), ks.chunk_prefix(hex) + "7", ks.tmp_prefix(hex, "tok") + "0", ks.sync(hex)}) {
      EXPECT_EQ(redis::key_slot(name), entry) << name;
      EXPECT_EQ(name.rfind(prefix + "{" + hex + "}:", 0), 0u) << name;
    }
    for (const std::string& name : {ks.lru(), ks.sizes(), ks.usage(), ks.keys()}) {
      EXPECT_EQ(redis::key_slot(name), index) << name;
    }
    EXPECT_EQ(ks.hex_of_meta(ks.meta(hex)), hex);
    EXPECT_EQ(ks.hex_of_meta(ks.sync(hex)), "");
    EXPECT_EQ(ks.hex_of_meta("other:{" + hex + "}:meta"), "");
  }
  redisdb::KeyScheme dflt;
  EXPECT_EQ(dflt.meta(hex), "kcache:{" + hex + "}:meta");
  EXPECT_EQ(dflt.chunk_prefix(hex), "kcache:{" + hex + "}:chunk:");
  EXPECT_EQ(dflt.tmp_prefix(hex, "t"), "kcache:{" + hex + "}:tmp:t:");
  EXPECT_EQ(dflt.sync(hex), "kcache:{" + hex + "}:sync");
  EXPECT_EQ(dflt.lru(), "kcache:{index}:lru");
  EXPECT_EQ(dflt.sizes(), "kcache:{index}:sizes");
  EXPECT_EQ(dflt.usage(), "kcache:{index}:usage");
  EXPECT_EQ(dflt.keys(), "kcache:{index}:keys");
  EXPECT_EQ(dflt.meta_pattern(), "kcache:{*}:meta");
}

}  // namespace
}  // namespace kcache::storage
