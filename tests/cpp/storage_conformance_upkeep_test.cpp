// The storage conformance suite, its upkeep half: eviction by each policy,
// capacity, verify's scrub, corrupt stored bytes, and sixteen threads at
// once, on every backend (fixture: storage_conformance.hpp; reads, writes
// and listing: storage_conformance_test.cpp).
#include "storage_conformance.hpp"

namespace kcache::storage {
namespace {

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

KCACHE_STORAGE_CONFORMANCE_BACKENDS();

}  // namespace
}  // namespace kcache::storage
