// One conformance suite for every storage backend (storage/backend.hpp):
// memory, disk (a temp dir), redis (a real redis-server on a random
// loopback port, started by this test) and redis-cluster (a real Cluster of
// three masters and three replicas, tests/cpp/redis_cluster_util.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "storage/disk_backend.hpp"
#include "storage/memory_backend.hpp"
#include "storage/redis_backend.hpp"
#include "redis_cluster_util.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

using testing::make_bytes;
using testing::make_key;
using Bytes = std::vector<std::uint8_t>;

// Started on first use and kept for the process: one per test binary run.
testing::RedisServer& single_redis() {
  static testing::RedisServer server;
  return server;
}

testing::RedisTestCluster& cluster_redis() {
  static testing::RedisTestCluster cluster;
  return cluster;
}

EntryMeta meta(std::string label, std::string target = "cpu", std::string mode = "default",
               std::string toolchain = "tc1") {
  return EntryMeta{std::move(label), std::move(target), std::move(mode), "f32", std::move(toolchain), 42};
}

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class StorageConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "redis" || GetParam() == "redis-cluster") redis_server().cli("FLUSHALL");
    backend_ = open(0);
    ASSERT_NE(backend_, nullptr);
  }

  std::unique_ptr<Backend> open(std::uint64_t capacity) {
    backend_.reset();  // the disk store allows one owner at a time
    if (GetParam() == "memory") return make_memory_backend(capacity);
    if (GetParam() == "disk") {
      DiskOptions o;
      o.root = dir_.path() + "/store";
      o.capacity_bytes = capacity;
      auto b = open_disk_backend(o);
      EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
      return b ? std::move(b.value()) : nullptr;
    }
    if (GetParam() == "redis-cluster") {
      auto o = parse_redis_cluster_url(redis_server().url());
      EXPECT_TRUE(o.ok());
      o->node.capacity_bytes = capacity;
      auto b = open_redis_cluster_backend(*o);
      EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
      return b ? std::move(b.value()) : nullptr;
    }
    auto o = parse_redis_url(redis_server().url());
    EXPECT_TRUE(o.ok());
    o->capacity_bytes = capacity;
    auto b = open_redis_backend(*o);
    EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
    return b ? std::move(b.value()) : nullptr;
  }

  // Flips the object's byte at offset 5 in the store itself.
  void corrupt_stored(const std::string& key) {
    if (GetParam() == "disk") {
      std::string path = dir_.path() + "/store/objects/" + key.substr(0, 2) + "/" + key;
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(5);
      char c = 0;
      f.get(c);
      f.seekp(5);
      f.put(static_cast<char>(c ^ 0x5a));
    } else {
      redis_server().cli("SETRANGE 'kcache:{" + key + "}:chunk:0' 5 X");
    }
  }

  Bytes put_ok(const std::string& key, const Bytes& bytes, const EntryMeta& m = meta("x/y")) {
    auto r = backend_->put(key, bytes, m);
    EXPECT_TRUE(r.ok()) << (r ? "" : r.error().message);
    return bytes;
  }

  // The Redis a redis or redis-cluster case stores in.
  testing::RedisCli& redis_server() {
    if (GetParam() == "redis-cluster") return cluster_redis();
    return single_redis();
  }

  testing::TempDir dir_;
  std::unique_ptr<Backend> backend_;
};

TEST_P(StorageConformance, PutGetHead) {
  std::string k = make_key("a");
  Bytes data = make_bytes(1000, 1);
  EXPECT_EQ(backend_->name(), GetParam());
  EXPECT_TRUE(backend_->ping().ok());
  EXPECT_EQ(backend_->get(k).error().code, Errc::not_found);
  EXPECT_EQ(backend_->head(k).error().code, Errc::not_found);
  auto put = backend_->put(k, data, meta("GPT2Block/cpu/f32", "cpu:avx512", "max-autotune", "torch-2.13"));
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_EQ(*put, PutOutcome::stored);
  auto got = backend_->get(k);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, data);
  ASSERT_TRUE(backend_->get(k).ok());
  auto h = backend_->head(k);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->key, k);
  EXPECT_EQ(h->size, 1000u);
  EXPECT_EQ(h->hits, 2u);
  EXPECT_EQ(h->meta.label, "GPT2Block/cpu/f32");
  EXPECT_EQ(h->meta.target, "cpu:avx512");
  EXPECT_EQ(h->meta.mode, "max-autotune");
  EXPECT_EQ(h->meta.dtype, "f32");
  EXPECT_EQ(h->meta.toolchain, "torch-2.13");
  EXPECT_EQ(h->meta.compile_ms, 42u);
  EXPECT_GT(h->created_ms, 0);
  EXPECT_GE(h->last_access_ms, h->created_ms);
}

TEST_P(StorageConformance, RejectsMalformedKeys) {
  std::vector<std::string> bads = {"", "abc", std::string(64, 'G'), std::string(64, 'A'), "../" + std::string(61, 'a')};
  for (const std::string& bad : bads) {
    EXPECT_EQ(backend_->get(bad).error().code, Errc::invalid_argument);
    EXPECT_EQ(backend_->put(bad, {1}, meta("x")).error().code, Errc::invalid_argument);
    EXPECT_EQ(backend_->remove(bad).error().code, Errc::invalid_argument);
  }
}

TEST_P(StorageConformance, EmptyAndMultiChunkObjects) {
  std::string empty = make_key("empty"), big = make_key("big");
  put_ok(empty, {});
  Bytes data = put_ok(big, make_bytes((5 << 20) / 2 + 3, 7));  // 2.5 MiB: three redis chunks
  EXPECT_EQ(backend_->get(empty).value(), Bytes{});
  EXPECT_EQ(backend_->get(big).value(), data);
  EXPECT_EQ(backend_->head(big)->size, data.size());
}

// read_range: exactly the bytes asked for, across chunk boundaries (three
// redis chunks of 1 MiB - 64), fewer at the end, none past it; no hit
// counted; the same key checks and not_found as get().
TEST_P(StorageConformance, ReadRangeReadsThePartAskedFor) {
  std::string k = make_key("ranged"), empty = make_key("ranged-empty");
  Bytes data = put_ok(k, make_bytes((5 << 20) / 2 + 3, 11));
  put_ok(empty, {});
  auto part = [&](std::uint64_t off, std::uint64_t len) {
    std::uint64_t end = std::min<std::uint64_t>(data.size(), off + len);
    return off >= data.size() ? Bytes{} : Bytes(data.begin() + static_cast<std::ptrdiff_t>(off), data.begin() + static_cast<std::ptrdiff_t>(end));
  };
  const std::uint64_t chunk = (1 << 20) - 64;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> cases = {
      {0, 24}, {0, 4096}, {chunk - 10, 20}, {chunk - 1, chunk + 2}, {5, 2 * chunk}, {data.size() - 7, 100},
      {data.size(), 10}, {data.size() + 1000, 10}, {100, 0}, {0, data.size()}};
  for (auto [off, len] : cases) {
    auto got = backend_->read_range(k, off, len);
    ASSERT_TRUE(got.ok()) << off << "+" << len << ": " << got.error().message;
    EXPECT_EQ(*got, part(off, len)) << off << "+" << len;
  }
  EXPECT_EQ(backend_->read_range(empty, 0, 10).value(), Bytes{});
  EXPECT_EQ(backend_->head(k)->hits, 0u);  // inspection is not a use of the entry
  EXPECT_EQ(backend_->read_range(make_key("absent"), 0, 10).error().code, Errc::not_found);
  EXPECT_EQ(backend_->read_range("abc", 0, 10).error().code, Errc::invalid_argument);
}

// A stored object shorter than its recorded size (a truncated file, a
// Redis chunk gone) is corrupt, with a message that says so, and is left
// in place: the next get() hashes it and quarantines or deletes it.
TEST_P(StorageConformance, ReadRangeOfATruncatedObjectIsCorrupt) {
  if (GetParam() == "memory") GTEST_SKIP() << "memory keeps no stored form to truncate";
  std::string k = make_key("truncated");
  Bytes data = put_ok(k, make_bytes((5 << 20) / 2 + 3, 12));
  ASSERT_TRUE(backend_->read_range(k, 0, 24).ok());
  if (GetParam() == "disk") {
    std::filesystem::resize_file(dir_.path() + "/store/objects/" + k.substr(0, 2) + "/" + k, 1000);
  } else {
    redis_server().cli("DEL 'kcache:{" + k + "}:chunk:1'");
  }
  auto got = backend_->read_range(k, (1 << 20) - 100, 200);  // spans chunks 0 and 1
  ASSERT_FALSE(got.ok()) << "bytes of a truncated object were served";
  EXPECT_EQ(got.error().code, Errc::corrupt) << got.error().message;
  EXPECT_NE(got.error().message.find(k), std::string::npos) << got.error().message;
  if (GetParam() == "disk") {
    EXPECT_EQ(backend_->read_range(k, 0, 24).error().code, Errc::corrupt);  // the size is checked first
  }
  EXPECT_TRUE(backend_->head(k).ok());  // nothing removed by a range read
  EXPECT_EQ(backend_->get(k).error().code, Errc::corrupt);
  EXPECT_EQ(backend_->read_range(k, 0, 24).error().code, Errc::not_found);
}

// breakdown(): per-target and per-mode counters that follow put, get,
// remove and evict exactly as a scan of list() would (memory, disk); redis
// keeps none and says so.
TEST_P(StorageConformance, BreakdownCountersFollowTheEntries) {
  if (GetParam() == "redis" || GetParam() == "redis-cluster") {
    EXPECT_FALSE(backend_->breakdown().has_value());
    return;
  }
  std::string a = make_key("bd-a"), b = make_key("bd-b"), c = make_key("bd-c");
  put_ok(a, make_bytes(100, 1), meta("x", "cpu", "default"));
  put_ok(b, make_bytes(200, 2), meta("x", "cpu", "aoti"));
  put_ok(c, make_bytes(300, 3), meta("x", "cuda:sm_90", "default"));
  ASSERT_TRUE(backend_->get(a).ok());
  ASSERT_TRUE(backend_->get(a).ok());
  auto scan = [&] {
    Breakdown out;
    const auto page = backend_->list({});  // named: a range-for over a temporary's member dangles
    for (const Entry& e : page->entries) {
      for (Tally* t : {&out.by_target[e.meta.target], &out.by_mode[e.meta.mode]}) {
        t->entries++;
        t->bytes += e.size;
        t->hits += e.hits;
      }
    }
    return out;
  };
  auto same = [&](const char* when) {
    auto kept = backend_->breakdown();
    ASSERT_TRUE(kept.has_value());
    auto want = scan();
    for (const auto& pair : {std::make_pair(&kept->by_target, &want.by_target), std::make_pair(&kept->by_mode, &want.by_mode)}) {
      ASSERT_EQ(pair.first->size(), pair.second->size()) << when;
      for (const auto& [name, t] : *pair.second) {
        const Tally& k = pair.first->at(name);
        EXPECT_EQ(k.entries, t.entries) << when << " " << name;
        EXPECT_EQ(k.bytes, t.bytes) << when << " " << name;
        EXPECT_EQ(k.hits, t.hits) << when << " " << name;
      }
    }
  };
  same("after puts and gets");
  EXPECT_EQ(backend_->breakdown()->by_target.at("cpu").entries, 2u);
  EXPECT_EQ(backend_->breakdown()->by_target.at("cpu").hits, 2u);
  ASSERT_TRUE(backend_->remove(a).ok());
  same("after a remove");
  EvictPolicy p;
  p.target = "cuda:sm_90";
  ASSERT_TRUE(backend_->evict(p).ok());
  same("after an evict");
  EXPECT_EQ(backend_->breakdown()->by_target.count("cuda:sm_90"), 0u);
}

// put_span (a spooled upload's mapping): stores exactly the span's bytes,
// with put()'s first-writer-wins and key checks; the first read (hashed on
// disk) proves the recorded digest is the bytes'.
TEST_P(StorageConformance, PutSpanStoresLikePut) {
  std::string k = make_key("span");
  Bytes around = make_bytes((5 << 20) / 2 + 100, 9);
  auto bytes = std::span<const std::uint8_t>(around).subspan(50, around.size() - 100);
  auto put = backend_->put_span(k, bytes, meta("span/cpu"));
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_EQ(*put, PutOutcome::stored);
  auto got = backend_->get(k);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_TRUE(std::equal(got->begin(), got->end(), bytes.begin(), bytes.end()));
  EXPECT_EQ(backend_->head(k)->size, bytes.size());
  EXPECT_EQ(backend_->head(k)->meta.label, "span/cpu");
  auto again = backend_->put_span(k, std::span<const std::uint8_t>(around), meta("other"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, PutOutcome::already_present);
  EXPECT_EQ(backend_->put_span("../x", bytes, meta("x")).error().code, Errc::invalid_argument);
}

TEST_P(StorageConformance, FirstWriterWins) {
  std::string k = make_key("first");
  Bytes first = put_ok(k, make_bytes(500, 1));
  auto again = backend_->put(k, make_bytes(600, 2), meta("other"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, PutOutcome::already_present);
  EXPECT_EQ(backend_->get(k).value(), first);
  EXPECT_EQ(backend_->head(k)->meta.label, "x/y");
}

TEST_P(StorageConformance, RemoveAndUsage) {
  std::string a = make_key("a"), b = make_key("b");
  put_ok(a, make_bytes(100, 1));
  put_ok(b, make_bytes(250, 2));
  auto u = backend_->usage();
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->entries, 2u);
  EXPECT_EQ(u->bytes, 350u);
  EXPECT_EQ(u->capacity_bytes, 0u);
  ASSERT_TRUE(backend_->remove(a).ok());
  EXPECT_EQ(backend_->remove(a).error().code, Errc::not_found);
  EXPECT_EQ(backend_->get(a).error().code, Errc::not_found);
  EXPECT_EQ(backend_->usage()->bytes, 250u);
  EXPECT_EQ(backend_->usage()->entries, 1u);
  Bytes again = put_ok(a, make_bytes(120, 3));  // a removed key can be stored anew
  EXPECT_EQ(backend_->get(a).value(), again);
}

TEST_P(StorageConformance, ListFiltersSortAndCursor) {
  for (int i = 0; i < 12; ++i) {
    put_ok(make_key("l" + std::to_string(i)), make_bytes(10 + 7 * i, i),
           meta("L" + std::to_string(i % 3) + "/blk" + std::to_string(i), i % 2 ? "cuda:sm_90" : "cpu",
                i < 6 ? "default" : "max-autotune", i % 4 == 0 ? "tcB" : "tcA"));
  }
  auto all = backend_->list({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->entries.size(), 12u);
  EXPECT_TRUE(all->next_cursor.empty());
  EXPECT_TRUE(std::is_sorted(all->entries.begin(), all->entries.end(),
                             [](const Entry& a, const Entry& b) { return a.key < b.key; }));
  ListQuery q;
  q.label_prefix = "L1/";
  EXPECT_EQ(backend_->list(q)->entries.size(), 4u);
  q = {};
  q.target = "cuda:sm_90";
  EXPECT_EQ(backend_->list(q)->entries.size(), 6u);
  q.mode = "max-autotune";
  EXPECT_EQ(backend_->list(q)->entries.size(), 3u);  // 7, 9, 11
  q = {};
  q.toolchain = "tcB";
  EXPECT_EQ(backend_->list(q)->entries.size(), 3u);  // 0, 4, 8

  q = {};
  q.sort = SortBy::size;
  q.descending = true;
  q.limit = 5;
  std::vector<std::uint64_t> sizes;
  std::set<std::string> seen;
  for (int page = 0; page < 10; ++page) {
    auto p = backend_->list(q);
    ASSERT_TRUE(p.ok()) << p.error().message;
    for (const Entry& e : p->entries) {
      sizes.push_back(e.size);
      seen.insert(e.key);
    }
    if (p->next_cursor.empty()) break;
    q.cursor = p->next_cursor;
  }
  EXPECT_EQ(seen.size(), 12u);
  ASSERT_EQ(sizes.size(), 12u);
  EXPECT_EQ(sizes.front(), 10u + 7 * 11);
  EXPECT_TRUE(std::is_sorted(sizes.rbegin(), sizes.rend()));
  q.cursor = "not-a-cursor";
  EXPECT_EQ(backend_->list(q).error().code, Errc::invalid_argument);
}

// a, b, c, d: sizes 100..400, put in that order, then a read (a is most recent).
struct EvictCase {
  const char* name;
  EvictPolicy policy;
  std::set<std::string> expect;  // of "a".."d"
};

TEST_P(StorageConformance, EvictByEachPolicy) {
  auto k = [](const std::string& n) { return make_key("evict-" + n); };
  auto pol = [](auto set) {
    EvictPolicy p;
    set(p);
    return p;
  };
  std::vector<EvictCase> cases = {
      {"target", pol([](EvictPolicy& p) { p.target = "t1"; }), {"a", "c"}},
      {"mode", pol([](EvictPolicy& p) { p.mode = "m2"; }), {"c", "d"}},
      {"label prefix", pol([](EvictPolicy& p) { p.label_prefix = "A/"; }), {"a", "b"}},
      {"toolchain", pol([](EvictPolicy& p) { p.toolchain = "tc2"; }), {"c"}},
      {"target and mode", pol([](EvictPolicy& p) { p.target = "t2", p.mode = "m2"; }), {"d"}},
      {"lru to budget", pol([](EvictPolicy& p) { p.max_bytes = 500; }), {"b", "c"}},
      {"lru within a filter", pol([](EvictPolicy& p) { p.max_bytes = 700, p.mode = "m1"; }), {"b", "a"}},
      {"older than", pol([](EvictPolicy& p) { p.older_than_ms = 150; }), {"b", "c", "d"}},
      {"dry run", pol([](EvictPolicy& p) { p.target = "t1", p.dry_run = true; }), {"a", "c"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    for (auto n : {"a", "b", "c", "d"}) (void)backend_->remove(k(n));
    put_ok(k("a"), make_bytes(100, 1), meta("A/x", "t1", "m1", "tc1"));
    pause_ms(3);
    put_ok(k("b"), make_bytes(200, 2), meta("A/y", "t2", "m1", "tc1"));
    pause_ms(3);
    put_ok(k("c"), make_bytes(300, 3), meta("B/z", "t1", "m2", "tc2"));
    pause_ms(3);
    put_ok(k("d"), make_bytes(400, 4), meta("B/w", "t2", "m2", "tc1"));
    if (c.policy.older_than_ms) pause_ms(300);
    pause_ms(3);
    ASSERT_TRUE(backend_->get(k("a")).ok());
    auto r = backend_->evict(c.policy);
    ASSERT_TRUE(r.ok()) << r.error().message;
    std::set<std::string> want;
    std::uint64_t want_bytes = 0;
    for (const auto& n : c.expect) {
      want.insert(k(n));
      want_bytes += 100 * static_cast<std::uint64_t>(n[0] - 'a' + 1);
    }
    EXPECT_EQ(as_set(r->keys), want);
    EXPECT_EQ(r->bytes, want_bytes);
    for (auto n : {"a", "b", "c", "d"}) {
      bool evicted = !c.policy.dry_run && c.expect.count(n);
      EXPECT_EQ(backend_->head(k(n)).ok(), !evicted) << n;
    }
    EXPECT_EQ(backend_->usage()->bytes, 1000 - (c.policy.dry_run ? 0 : want_bytes));
  }
  EXPECT_EQ(backend_->evict({}).error().code, Errc::invalid_argument);
}

TEST_P(StorageConformance, CapacityEvictsLeastRecentlyUsed) {
  backend_ = open(1000);
  std::vector<std::string> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(make_key("cap" + std::to_string(i)));
    put_ok(keys.back(), make_bytes(300, i));
    pause_ms(3);
    if (i == 2) {
      ASSERT_TRUE(backend_->get(keys[0]).ok());  // keys[1] is now the oldest
    }
  }
  auto u = backend_->usage();
  EXPECT_LE(u->bytes, 1000u);
  EXPECT_EQ(u->capacity_bytes, 1000u);
  EXPECT_EQ(backend_->head(keys[1]).error().code, Errc::not_found);
  for (int i : {0, 2, 3}) EXPECT_TRUE(backend_->head(keys[i]).ok()) << i;
  EXPECT_EQ(backend_->put(make_key("huge"), make_bytes(1001, 9), meta("x")).error().code, Errc::full);
}

TEST_P(StorageConformance, VerifyScrubsWithTheVerifier) {
  std::vector<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    keys.push_back(make_key("v" + std::to_string(i)));
    put_ok(keys.back(), make_bytes(2000, i));
  }
  Verifier reject_second = [&](const std::string& key, const Bytes& bytes) {
    return key != keys[1] && bytes.size() == 2000;
  };
  auto r = backend_->verify(reject_second, /*remove=*/false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->checked, 3u);
  EXPECT_EQ(r->corrupt, std::vector<std::string>{keys[1]});
  EXPECT_EQ(r->removed, 0u);
  EXPECT_TRUE(backend_->get(keys[1]).ok());
  r = backend_->verify(reject_second, /*remove=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->removed, 1u);
  EXPECT_EQ(backend_->get(keys[1]).error().code, Errc::not_found);
  EXPECT_TRUE(backend_->get(keys[0]).ok());
  EXPECT_EQ(backend_->usage()->entries, 2u);
}

TEST_P(StorageConformance, CorruptObjectIsNeverServed) {
  if (GetParam() == "memory") GTEST_SKIP() << "memory keeps no stored form to corrupt";
  std::string k = make_key("corrupt");
  Bytes data = make_bytes(3000, 5);
  data[5] = 'A';  // so that the redis SETRANGE to 'X' changes it
  put_ok(k, data);
  corrupt_stored(k);
  auto got = backend_->get(k);
  ASSERT_FALSE(got.ok()) << "corrupt bytes were served";
  EXPECT_EQ(got.error().code, Errc::corrupt) << got.error().message;
  EXPECT_EQ(backend_->get(k).error().code, Errc::not_found);
  EXPECT_EQ(backend_->list({})->entries.size(), 0u);
  EXPECT_EQ(backend_->usage()->entries, 0u);
  if (GetParam() == "disk") {
    EXPECT_FALSE(std::filesystem::is_empty(dir_.path() + "/store/quarantine"));
  } else {
    EXPECT_EQ(redis_server().cli("--scan --pattern 'kcache:{" + k + "}:*'"), "");
  }
  put_ok(k, data);  // the key can be stored again
  EXPECT_EQ(backend_->get(k).value(), data);
}

TEST_P(StorageConformance, SixteenThreadsSameAndDifferentKeys) {
  constexpr int k_threads = 16, k_rounds = 12, k_shared = 4;
  std::mutex mu;
  std::map<std::string, Bytes> first_seen;  // shared key -> the bytes every reader must see
  std::map<std::string, int> stored;        // shared key -> PutOutcome::stored count
  std::vector<std::string> failures;
  auto fail = [&](std::string what) {
    std::lock_guard lock(mu);
    failures.push_back(std::move(what));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < k_rounds; ++i) {
        std::string shared = make_key("shared" + std::to_string(i % k_shared));
        std::size_t size = 1000 + static_cast<std::size_t>((t * 7 + i) % 5) * 30000 + (t == 3 && i == 5 ? 1500000 : 0);
        auto put = backend_->put(shared, make_bytes(size, t * 100 + i), meta("shared"));
        if (!put) return fail("shared put: " + put.error().message);
        if (*put == PutOutcome::stored) {
          std::lock_guard lock(mu);
          stored[shared]++;
        }
        std::string own = make_key("own" + std::to_string(t) + "/" + std::to_string(i));
        Bytes mine = make_bytes(500 + static_cast<std::size_t>(i) * 2000, t * 1000 + i);
        if (auto p = backend_->put(own, mine, meta("own")); !p || *p != PutOutcome::stored) return fail("own put");
        auto got = backend_->get(shared);
        if (!got) return fail("shared get: " + got.error().message);
        {
          std::lock_guard lock(mu);
          auto [it, fresh] = first_seen.emplace(shared, *got);
          if (!fresh && it->second != *got) return fail("two different objects under one key");
        }
        auto back = backend_->get(own);
        if (!back || *back != mine) return fail("own object lost or torn");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();
  for (const auto& [key, n] : stored) EXPECT_EQ(n, 1) << "first writer wins for " << key;
  EXPECT_EQ(backend_->usage()->entries, static_cast<std::uint64_t>(k_shared + k_threads * k_rounds));
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageConformance, ::testing::Values("memory", "disk", "redis", "redis-cluster"),
                         [](const auto& info) {
                           std::string name = info.param;  // gtest names allow no '-'
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace kcache::storage
