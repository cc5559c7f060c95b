// One conformance suite for every storage backend (storage/backend.hpp):
// memory, disk (a temp dir), redis (a real redis-server on a random
// loopback port, started by this test) and redis-cluster (a real Cluster of
// three masters and three replicas, tests/cpp/redis_cluster_util.hpp).
// This half: reads, writes, ranges, counters and listing; eviction,
// capacity, verify, corruption and concurrency are in
// storage_conformance_upkeep_test.cpp; the fixture in storage_conformance.hpp.
#include "storage_conformance.hpp"

namespace kcache::storage {
namespace {

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

// KeepsBreakdown (storage/capabilities.hpp): per-target and per-mode
// counters that follow put, get, remove and evict exactly as a scan of
// list() would (memory, disk); redis lacks the capability.
TEST_P(StorageConformance, BreakdownCountersFollowTheEntries) {
  auto* keeps = capability<KeepsBreakdown>(*backend_);
  if (GetParam() == "redis" || GetParam() == "redis-cluster") {
    EXPECT_EQ(keeps, nullptr);
    EXPECT_EQ(capability<HasClusterRouter>(*backend_) != nullptr, GetParam() == "redis-cluster");
    return;
  }
  ASSERT_NE(keeps, nullptr);
  EXPECT_EQ(capability<HasClusterRouter>(*backend_), nullptr);
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
    auto kept = std::optional<Breakdown>(keeps->breakdown());
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
  EXPECT_EQ(keeps->breakdown().by_target.at("cpu").entries, 2u);
  EXPECT_EQ(keeps->breakdown().by_target.at("cpu").hits, 2u);
  ASSERT_TRUE(backend_->remove(a).ok());
  same("after a remove");
  EvictPolicy p;
  p.target = "cuda:sm_90";
  ASSERT_TRUE(backend_->evict(p).ok());
  same("after an evict");
  EXPECT_EQ(keeps->breakdown().by_target.count("cuda:sm_90"), 0u);
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

KCACHE_STORAGE_CONFORMANCE_BACKENDS();

}  // namespace
}  // namespace kcache::storage
