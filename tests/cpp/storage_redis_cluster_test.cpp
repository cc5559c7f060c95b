// Redis Cluster specifics, against a real Cluster of three masters and three
// replicas on loopback (redis_cluster_util.hpp): the slot function agrees
// with Redis's own CLUSTER KEYSLOT, URLs, keys spread over every master,
// MOVED after a slot moved, ASK during a migration, and recovery after a
// master is killed and its replica promoted. (The conformance suite,
// storage_conformance_test.cpp, runs the Backend contract on the Cluster.)
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "redis/cluster.hpp"
#include "redis/slots.hpp"
#include "redis_cluster_util.hpp"
#include "storage/redis/backend.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

using testing::make_bytes;
using testing::make_key;
using Clock = std::chrono::steady_clock;

const EntryMeta k_meta{"Blk/cpu", "cpu", "default", "f32", "tc", 7};

std::string meta_key(const std::string& hex) { return "kcache:{" + hex + "}:meta"; }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

TEST(RedisSlots, KnownValuesAndHashTags) {
  EXPECT_EQ(redis::crc16("123456789"), 0x31C3);  // CRC-16/XMODEM check value
  EXPECT_EQ(redis::key_slot("foo"), 12182);
  EXPECT_EQ(redis::key_slot("{user1000}.following"), redis::key_slot("{user1000}.followers"));
  EXPECT_EQ(redis::key_slot("foo{}{bar}"), redis::crc16("foo{}{bar}") % 16384);  // empty tag: whole key
  EXPECT_EQ(redis::key_slot("foo{{bar}}zap"), redis::crc16("{bar") % 16384);
  EXPECT_EQ(redis::key_slot("foo{bar}{zap}"), redis::crc16("bar") % 16384);
  EXPECT_EQ(redis::key_slot("kcache:{index}:lru"), redis::key_slot("kcache:{index}:usage"));
}

TEST(RedisSlots, FirstKeyOfACommand) {
  using redis::first_key;
  EXPECT_EQ(first_key({"GET", "a"}).value(), "a");
  EXPECT_EQ(first_key({"EVAL", "return 1", "2", "k1", "k2", "arg"}).value(), "k1");
  EXPECT_FALSE(first_key({"EVAL", "return 1", "0", "arg"}).has_value());
  for (redis::Args keyless : {redis::Args{"PING"}, redis::Args{"PUBLISH", "ch", "m"}, redis::Args{"MULTI"},
                              redis::Args{"EXEC"}, redis::Args{"SCAN", "0"}}) {
    EXPECT_FALSE(first_key(keyless).has_value()) << keyless[0];
  }
}

TEST(RedisClusterUrl, ParsesSeedsCredentialsAndQuery) {
  auto o = parse_redis_cluster_url("redis-cluster://alice:s%40cret@h1:7000,h2:7001,h3/?timeout_ms=900&pool=3");
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->seeds.size(), 3u);
  EXPECT_EQ(o->seeds[0], (std::pair<std::string, int>{"h1", 7000}));
  EXPECT_EQ(o->seeds[1], (std::pair<std::string, int>{"h2", 7001}));
  EXPECT_EQ(o->seeds[2], (std::pair<std::string, int>{"h3", 6379}));
  EXPECT_EQ(o->node.user, "alice");
  EXPECT_EQ(o->node.password, "s@cret");
  EXPECT_EQ(o->node.op_timeout.count(), 900);
  EXPECT_EQ(o->node.pool_size, 3u);
  EXPECT_TRUE(parse_redis_cluster_url("redis-cluster://h1:1").ok());
  for (const char* bad : {"redis://h:1/0", "redis-cluster://", "redis-cluster://h:1/3", "redis-cluster://h1:1,,h2:2/",
                          "redis-cluster://h1:0/", "redis-cluster://h1:1/?nope=1"}) {
    EXPECT_EQ(parse_redis_cluster_url(bad).error().code, Errc::invalid_argument) << bad;
  }
}

TEST(RedisClusterUrl, DurabilityOptionsReachEveryNode) {
  auto o = parse_redis_cluster_url("redis-cluster://h1:7000,h2:7001/?wait_replicas=1&wait_timeout_ms=250");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->node.wait_replicas, 1);
  EXPECT_EQ(o->node.wait_timeout.count(), 250);
  EXPECT_EQ(parse_redis_cluster_url("redis-cluster://h1:7000/").value().node.wait_replicas, 0);
  EXPECT_EQ(parse_redis_cluster_url("redis-cluster://h1:7000/?wait_replicas=1&timeout_ms=400&wait_timeout_ms=400")
                .error()
                .code,
            Errc::invalid_argument);
}

TEST(RedisClusterOpen, NoReachableSeedIsUnavailable) {
  int port = testing::free_port();  // nothing listens there
  auto b = open_backend("redis-cluster://127.0.0.1:" + std::to_string(port) + "/?connect_timeout_ms=300", 0);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, Errc::unavailable) << b.error().message;
}

TEST(RedisClusterAuth, PasswordFromTheUrlOnEveryNode) {
  testing::RedisTestCluster cluster(3000, "pa55word");
  auto good = open_backend(cluster.url(), 0);
  ASSERT_TRUE(good.ok()) << good.error().message;
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) {  // enough keys to need every master's pool
    keys.push_back(make_key("auth" + std::to_string(i)));
    ASSERT_TRUE((*good)->put(keys.back(), make_bytes(100, i), k_meta).ok());
  }
  for (const auto& k : keys) EXPECT_TRUE((*good)->get(k).ok()) << k;
  std::string wrong_url = cluster.url();
  wrong_url.replace(wrong_url.find("pa55word"), 8, "nope");
  auto wrong = open_backend(wrong_url, 0);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, Errc::unavailable);
  EXPECT_EQ(wrong.error().message.find("nope"), std::string::npos) << "secret in an error message";
}

class RedisClusterTest : public ::testing::Test {
 protected:
  RedisClusterOptions options() const {
    auto o = parse_redis_cluster_url(cluster_.url());
    EXPECT_TRUE(o.ok());
    return *o;
  }

  std::unique_ptr<Backend> open() const {
    auto b = open_redis_cluster_backend(options());
    EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
    return b ? std::move(b.value()) : nullptr;
  }

  std::unique_ptr<redis::RedisCluster> router() const {
    auto r = std::make_unique<redis::RedisCluster>(options().router());
    auto s = r->start();
    EXPECT_TRUE(s.ok()) << (s ? "" : s.error().message);
    return r;
  }

  // A master other than `port`.
  int other_master(int port) const {
    for (int m : cluster_.masters()) {
      if (m != port) return m;
    }
    return -1;
  }

  // First half of a slot move: `to` imports `slot` from `from`, which migrates it.
  void begin_migration(int slot, int from, int to) {
    std::string s = std::to_string(slot);
    ASSERT_EQ(trim(cluster_.node_cli(to, "CLUSTER SETSLOT " + s + " IMPORTING " + cluster_.node_id(from))), "OK");
    ASSERT_EQ(trim(cluster_.node_cli(from, "CLUSTER SETSLOT " + s + " MIGRATING " + cluster_.node_id(to))), "OK");
  }

  // Moves the slot's keys with MIGRATE, then gives the slot to `to` on every master.
  void finish_migration(int slot, int from, int to) {
    std::string s = std::to_string(slot);
    for (;;) {
      std::string keys = cluster_.node_cli(from, "CLUSTER GETKEYSINSLOT " + s + " 100");
      if (trim(keys).empty()) break;
      std::string args = "MIGRATE 127.0.0.1 " + std::to_string(to) + " '' 0 5000 KEYS";
      std::istringstream in(keys);
      for (std::string k; in >> k;) args += " '" + k + "'";
      ASSERT_EQ(trim(cluster_.node_cli(from, args)), "OK");
    }
    std::string to_id = cluster_.node_id(to);
    ASSERT_EQ(trim(cluster_.node_cli(to, "CLUSTER SETSLOT " + s + " NODE " + to_id)), "OK");
    ASSERT_EQ(trim(cluster_.node_cli(from, "CLUSTER SETSLOT " + s + " NODE " + to_id)), "OK");
    for (int m : cluster_.masters()) {
      if (m != to && m != from) cluster_.node_cli(m, "CLUSTER SETSLOT " + s + " NODE " + to_id);
    }
  }

  testing::RedisTestCluster cluster_;
};

// The durability setting: WAIT goes to the entry's master on the connection
// that published, so when put() returns the replica has the entry; with that
// replica hung (SIGSTOP) the put fails within wait_timeout, says why, and a
// retry once it is back is idempotent (present, confirmed on the replica).
TEST_F(RedisClusterTest, DurablePutReachesTheReplicaOrFailsWithinTheWait) {
  auto o = options();
  o.node.wait_replicas = 1;
  // Long enough that a replica starved of CPU on a loaded machine still
  // answers in time; below the 2 s operation timeout, as the URL rule asks.
  o.node.wait_timeout = std::chrono::milliseconds(1000);
  auto opened = open_redis_cluster_backend(o);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto& backend = *opened;
  ASSERT_TRUE(cluster_.wait_replicas_online(std::chrono::seconds(20))) << "replicas never finished their first sync";
  // Keys on every master, each read back on that master's replica at once.
  for (int i = 0; i < 9; ++i) {
    std::string k = make_key("durable" + std::to_string(i));
    auto data = make_bytes(2000 + static_cast<std::size_t>(i), i);
    auto put = backend->put(k, data, k_meta);
    ASSERT_TRUE(put.ok()) << put.error().message;
    EXPECT_EQ(*put, PutOutcome::stored);
    int master = cluster_.owner_of(redis::key_slot(meta_key(k)), cluster_.ports().front());
    int replica = cluster_.replica_of(master);
    ASSERT_GT(replica, 0) << "no replica of " << master;
    std::string seen = cluster_.replica_read(replica, "HGET " + meta_key(k) + " size");
    EXPECT_NE(seen.find(std::to_string(2000 + i)), std::string::npos)
        << "replica " << replica << " of " << master << " lacks " << k << ": " << seen;
  }

  std::string k = make_key("undurable");
  auto data = make_bytes(5000, 8);
  int master = cluster_.owner_of(redis::key_slot(meta_key(k)), cluster_.ports().front());
  int replica = cluster_.replica_of(master);
  ASSERT_GT(replica, 0);
  cluster_.pause_node(replica);  // a replica, and for under the 3 s node timeout: nothing fails over
  auto start = Clock::now();
  auto put = backend->put(k, data, k_meta);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  cluster_.resume_node(replica);
  ASSERT_FALSE(put.ok()) << "a put no replica acknowledged must not succeed";
  EXPECT_EQ(put.error().code, Errc::not_durable) << put.error().message;
  EXPECT_NE(put.error().message.find("0 of 1 replicas"), std::string::npos) << put.error().message;
  EXPECT_GE(took, 950) << "WAIT returned before its timeout";
  EXPECT_LT(took, 4000) << "one wait_timeout (1 s), generous for a loaded machine";

  auto retried = backend->put(k, data, k_meta);
  ASSERT_TRUE(retried.ok()) << retried.error().message;
  EXPECT_EQ(*retried, PutOutcome::already_present) << "the first attempt's entry is reused";
  EXPECT_NE(cluster_.replica_read(replica, "HGET " + meta_key(k) + " size").find("5000"), std::string::npos);
  EXPECT_EQ(backend->get(k).value(), data);
}

TEST_F(RedisClusterTest, SlotFunctionAgreesWithRedis) {
  int port = cluster_.ports().front();
  for (int i = 0; i < 40; ++i) {
    std::string key = meta_key(make_key("slot" + std::to_string(i)));
    EXPECT_EQ(std::to_string(redis::key_slot(key)), trim(cluster_.node_cli(port, "CLUSTER KEYSLOT '" + key + "'")))
        << key;
  }
}

TEST_F(RedisClusterTest, KeysLandOnEveryMasterAndTheIndexOnOne) {
  auto backend = open();
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "redis-cluster");
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) {
    keys.push_back(make_key("spread" + std::to_string(i)));
    ASSERT_TRUE(backend->put(keys.back(), make_bytes(3000 + static_cast<std::size_t>(i), i), k_meta).ok());
  }
  auto masters = cluster_.masters();
  ASSERT_EQ(masters.size(), 3u);
  int index_holders = 0;
  for (int m : masters) {
    long n = std::stol(trim(cluster_.node_cli(m, "DBSIZE")));
    EXPECT_GT(n, 3) << "master " << m << " holds no entries";
    if (trim(cluster_.node_cli(m, "EXISTS 'kcache:{index}:lru'")) == "1") index_holders++;
  }
  EXPECT_EQ(index_holders, 1) << "the index keys must share one slot";
  for (int i = 0; i < 60; ++i) {
    auto got = backend->get(keys[static_cast<std::size_t>(i)]);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, make_bytes(3000 + static_cast<std::size_t>(i), i));
  }
  EXPECT_EQ(backend->list({})->entries.size(), 60u);
  EXPECT_EQ(backend->usage()->entries, 60u);
}

TEST_F(RedisClusterTest, MovedAfterASlotMovedRefreshesTheMap) {
  auto backend = open();
  auto r = router();
  std::string k = make_key("moving");
  auto data = make_bytes(5000, 9);
  ASSERT_TRUE(backend->put(k, data, k_meta).ok());
  int slot = redis::key_slot(meta_key(k));
  int from = cluster_.owner_of(slot, cluster_.ports().front());
  int to = other_master(from);
  ASSERT_GT(from, 0);
  ASSERT_GT(to, 0);
  ASSERT_EQ(r->slot_map()->master_of(slot)->port, from);
  begin_migration(slot, from, to);
  finish_migration(slot, from, to);
  ASSERT_EQ(cluster_.owner_of(slot, to), to);

  auto before = r->counts();
  auto hit = r->command({"HGET", meta_key(k), "size"});
  ASSERT_TRUE(hit.ok()) << hit.error().message;
  EXPECT_EQ(std::string((*hit)->str, (*hit)->len), "5000");
  auto after = r->counts();
  EXPECT_EQ(after.moved, before.moved + 1);
  EXPECT_EQ(after.refreshes, before.refreshes + 1);
  EXPECT_EQ(r->slot_map()->master_of(slot)->port, to) << "the slot map was not refreshed";
  ASSERT_TRUE(r->command({"HGET", meta_key(k), "size"}).ok());
  EXPECT_EQ(r->counts().moved, after.moved) << "a refreshed map needs no second redirect";

  // The backend opened before the move follows it too, reads and writes alike.
  EXPECT_EQ(backend->get(k).value(), data);
  EXPECT_EQ(backend->remove(k).ok(), true);
  EXPECT_EQ(backend->get(k).error().code, Errc::not_found);
}

TEST_F(RedisClusterTest, AskDuringAMigrationIsFollowed) {
  auto backend = open();
  auto r = router();
  std::string k = make_key("asked");
  int slot = redis::key_slot(meta_key(k));
  int from = cluster_.owner_of(slot, cluster_.ports().front());
  int to = other_master(from);
  begin_migration(slot, from, to);

  // A key the migrating node does not have is answered with ASK: it goes to the target.
  auto before = r->counts();
  ASSERT_TRUE(r->command({"SET", "kcache:{" + k + "}:probe", "v"}).ok());
  EXPECT_EQ(r->counts().ask, before.ask + 1);
  EXPECT_EQ(r->counts().moved, before.moved);
  EXPECT_EQ(r->slot_map()->master_of(slot)->port, from) << "ASK must not change the map";

  // The backend's put (EXISTS, temp SETs, publish script) and get (MULTI
  // ... EXEC, touch) all land on the importing node.
  auto data = make_bytes(2'500'000, 4);  // three chunks: the MGET of chunks 1..2 too
  auto put = backend->put(k, data, k_meta);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_EQ(backend->get(k).value(), data);
  EXPECT_EQ(trim(cluster_.node_cli(from, "CLUSTER COUNTKEYSINSLOT " + std::to_string(slot))), "0");
  // meta, three chunks and the probe:
  EXPECT_EQ(trim(cluster_.node_cli(to, "CLUSTER COUNTKEYSINSLOT " + std::to_string(slot))), "5");
  finish_migration(slot, from, to);
  EXPECT_EQ(backend->get(k).value(), data);
  EXPECT_EQ(backend->head(k)->hits, 2u);
}

// An entry split between the two nodes of a migrating slot (its meta already
// on the importing node, its chunks still on the migrating one, as when one
// MIGRATE batch of a reshard does not hold all of a slot's keys) answers
// ASK on the source and TRYAGAIN on the target (the read is one MULTI over
// several keys) until its last key has moved. The read waits for that,
// within its deadline (connect + op timeout), instead of giving up after a
// fixed number of redirects and turning a reshard into misses.
TEST_F(RedisClusterTest, EntrySplitByAMigrationIsReadOnceItsKeysHaveMoved) {
  auto backend = open();
  auto r = router();
  std::string k = make_key("split");
  auto data = make_bytes(2'500'000, 5);  // meta and three chunks
  ASSERT_TRUE(backend->put(k, data, k_meta).ok());
  int slot = redis::key_slot(meta_key(k));
  int from = cluster_.owner_of(slot, cluster_.ports().front());
  int to = other_master(from);
  begin_migration(slot, from, to);
  ASSERT_EQ(trim(cluster_.node_cli(from, "MIGRATE 127.0.0.1 " + std::to_string(to) + " '' 0 5000 KEYS '" +
                                             meta_key(k) + "'")),
            "OK");
  std::thread rest([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    finish_migration(slot, from, to);
  });
  auto before = r->counts();
  auto start = Clock::now();
  auto got = r->pipeline({{"MULTI"}, {"HGET", meta_key(k), "size"}, {"GET", "kcache:{" + k + "}:chunk:0"}, {"EXEC"}});
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  rest.join();
  ASSERT_TRUE(got.ok()) << got.error().message << " after " << took << " ms";
  EXPECT_GE(took, 400) << "read before the slot's keys were together";
  auto after = r->counts();
  EXPECT_GE(after.ask, before.ask + 1);
  EXPECT_GE(after.tryagain, before.tryagain + 1);
  EXPECT_EQ(after.failed, before.failed);
  // The backend's own read across the same kind of split: the slot moves back
  // with the meta first again.
  begin_migration(slot, to, from);
  ASSERT_EQ(trim(cluster_.node_cli(to, "MIGRATE 127.0.0.1 " + std::to_string(from) + " '' 0 5000 KEYS '" +
                                           meta_key(k) + "'")),
            "OK");
  std::thread back([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    finish_migration(slot, to, from);
  });
  auto read = backend->get(k);
  back.join();
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, data);
  EXPECT_EQ(backend->get(k).value(), data);
}

TEST_F(RedisClusterTest, HungMasterTimesOutOnceThenRecovers) {
  auto o = options();
  o.node.op_timeout = std::chrono::milliseconds(500);
  o.node.connect_timeout = std::chrono::milliseconds(300);
  auto opened = open_redis_cluster_backend(o);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto& backend = *opened;
  std::string k = make_key("hung");
  auto data = make_bytes(1000, 3);
  ASSERT_TRUE(backend->put(k, data, k_meta).ok());
  int master = cluster_.owner_of(redis::key_slot(meta_key(k)), cluster_.ports().front());
  cluster_.pause_node(master);  // well under the 3 s node timeout: no failover
  auto start = Clock::now();
  auto got = backend->get(k);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  cluster_.resume_node(master);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::timeout) << got.error().message;
  // One operation timeout (500 ms), not one per retry round; generous for a loaded machine.
  EXPECT_LT(took, 2500);
  auto again = backend->get(k);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, data);
}

TEST_F(RedisClusterTest, RecoversAfterAMasterIsKilledAndItsReplicaPromoted) {
  auto backend = open();
  std::string k = make_key("survivor");
  auto data = make_bytes(40000, 2);
  ASSERT_TRUE(backend->put(k, data, k_meta).ok());
  int slot = redis::key_slot(meta_key(k));
  int victim = cluster_.owner_of(slot, cluster_.ports().front());
  ASSERT_TRUE(cluster_.wait_replicated(victim, std::chrono::seconds(20)))
      << cluster_.node_cli(victim, "INFO replication");
  cluster_.kill_node(victim);

  // While the replica is not yet promoted: fail open, quickly.
  auto start = Clock::now();
  auto during = backend->get(k);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  if (!during.ok()) {
    EXPECT_EQ(during.error().code, Errc::unavailable) << during.error().message;
  }
  EXPECT_LT(took, 5000) << "a dead master must cost a bounded time";

  ASSERT_TRUE(cluster_.wait_failed_over(victim, std::chrono::seconds(30))) << "the replica was never promoted";
  int promoted = cluster_.owner_of(slot, cluster_.masters().front());
  ASSERT_GT(promoted, 0);
  EXPECT_NE(promoted, victim);
  auto survived = backend->get(k);
  ASSERT_TRUE(survived.ok()) << survived.error().message;
  EXPECT_EQ(*survived, data) << "the replicated entry must survive the failover";
  std::string k2 = make_key("after-failover");
  auto put = backend->put(k2, data, k_meta);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_EQ(backend->get(k2).value(), data);
  EXPECT_EQ(backend->usage()->entries, 2u);
}

}  // namespace
}  // namespace kcache::storage
