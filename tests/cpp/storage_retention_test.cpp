// Retention by value without a backend (storage/retention.hpp,
// storage/entry_query.hpp): the formula's values, the order key, and
// select_for_eviction / list paging over generated entries whose ages a
// backend could not fake (the conformance suite runs the same choices
// through every backend: storage_conformance_retention_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "storage/entry_query.hpp"
#include "storage/index_page.hpp"
#include "storage/retention.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

using testing::make_key;

constexpr std::int64_t k_now = 1'700'000'000'000;
constexpr std::int64_t k_day = 24LL * 3600 * 1000;

Entry entry(std::uint64_t compile_ms, std::uint64_t size, std::uint64_t hits, std::int64_t age_ms) {
  Entry e;
  e.meta.compile_ms = compile_ms;
  e.size = size;
  e.hits = hits;
  e.last_access_ms = k_now - age_ms;
  e.created_ms = e.last_access_ms;
  return e;
}

TEST(EntryValue, IsTheDocumentedFormula) {
  // compile_seconds × (1 + hits) × 2^(−age/window) / max(size, 1)
  EXPECT_DOUBLE_EQ(entry_value(entry(2000, 1000, 0, 0), k_now, k_day), 2.0 / 1000);
  EXPECT_DOUBLE_EQ(entry_value(entry(2000, 1000, 4, 0), k_now, k_day), 2.0 * 5 / 1000);
  EXPECT_DOUBLE_EQ(entry_value(entry(2000, 1000, 4, k_day), k_now, k_day), 2.0 * 2.5 / 1000) << "one half-life";
  EXPECT_DOUBLE_EQ(entry_value(entry(2000, 1000, 4, 2 * k_day), k_now, k_day), 2.0 * 1.25 / 1000);
  EXPECT_DOUBLE_EQ(entry_value(entry(2000, 1000, 0, k_day), k_now, k_day), 1.0 / 1000) << "unread entries age too";
  EXPECT_DOUBLE_EQ(entry_value(entry(2000, 1000, 4, -k_day), k_now, k_day), 2.0 * 5 / 1000) << "age is at least 0";
  EXPECT_DOUBLE_EQ(entry_value(entry(1500, 0, 0, 0), k_now, k_day), 1.5) << "size counts as at least 1";
  EXPECT_EQ(entry_value(entry(0, 1000, 99, 0), k_now, k_day), 0.0) << "nothing to save";
  EXPECT_DOUBLE_EQ(entry_value(entry(1000, 1, 1, 5), k_now, 0), 1.0 * 2 * std::exp2(-5.0)) << "window <= 0: 1 ms";
  double v = entry_value(entry(std::numeric_limits<std::uint64_t>::max(), 1, std::numeric_limits<std::uint64_t>::max(), 0),
                         k_now, k_day);
  EXPECT_TRUE(std::isfinite(v));
}

TEST(EntryValue, OrderKeyKeepsTheOrderExactly) {
  std::mt19937_64 rng(3);
  std::vector<double> values = {0.0, -0.0, std::numeric_limits<double>::denorm_min(), 1e-300, 1e-12, 1.0,
                                std::nextafter(1.0, 2.0), 1e300, std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 2000; ++i) values.push_back(std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 200) - 150));
  for (double a : values) {
    for (double b : {values[static_cast<std::size_t>(rng() % values.size())], std::nextafter(a, 0.0)}) {
      EXPECT_EQ(a < b, value_order_key(a) < value_order_key(b)) << a << " " << b;
      EXPECT_EQ(a == b, value_order_key(a) == value_order_key(b)) << a << " " << b;
    }
  }
  EXPECT_EQ(value_order_key(-1.0), 0);
  EXPECT_EQ(value_order_key(std::nan("")), 0);
  EXPECT_EQ(value_order_key(0.0), 0);
}

// Random entries: sizes, compile times, hits, ages up to 60 days, about one
// in six pinned.
std::vector<Entry> generate(std::mt19937& rng, int n) {
  auto u = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  std::vector<Entry> out;
  for (int i = 0; i < n; ++i) {
    Entry e = entry(u(0, 4) == 0 ? 0 : u(1, 120'000), u(0, 4) == 0 ? u(0, 10) : u(1, 50'000'000), u(0, 3) == 0 ? 0 : u(1, 500),
                    static_cast<std::int64_t>(u(0, 60 * k_day)));
    if (u(0, 9) == 0) e.last_access_ms = out.empty() ? e.last_access_ms : out.back().last_access_ms;  // LRU ties
    e.key = make_key("gen" + std::to_string(i) + "/" + std::to_string(rng()));
    e.meta.target = u(0, 1) ? "cpu" : "cuda:sm_90";
    e.pinned = u(0, 5) == 0;
    out.push_back(std::move(e));
  }
  return out;
}

TEST(SelectForEviction, ByValueGenerated) {
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto all = generate(rng, 1 + static_cast<int>(rng() % 60));
    std::uint64_t bytes = 0, pinned_bytes = 0, pinned_n = 0;
    for (const Entry& e : all) {
      bytes += e.size;
      if (e.pinned) pinned_bytes += e.size, pinned_n++;
    }
    EvictPolicy p;
    p.order = EvictOrder::value;
    p.value_window_ms = static_cast<std::int64_t>(1 + rng() % (30 * k_day));
    if (rng() % 3 != 0) p.max_bytes = bytes == 0 ? 0 : rng() % (bytes + 1);
    if (!p.max_bytes || rng() % 3 == 0) p.max_entries = rng() % (all.size() + 1);
    if (rng() % 4 == 0) p.target = "cpu";
    auto r = select_for_eviction(all, p, bytes, all.size(), k_now);
    ASSERT_TRUE(r.ok()) << r.error().message;
    std::set<std::string> gone(r->keys.begin(), r->keys.end());
    ASSERT_EQ(gone.size(), r->keys.size()) << "a key chosen twice";
    std::uint64_t left_bytes = bytes, left_n = all.size(), chosen_bytes = 0;
    std::vector<const Entry*> evicted, kept;  // kept: those it could have taken
    for (const Entry& e : all) {
      bool taken = gone.count(e.key) != 0;
      EXPECT_FALSE(taken && e.pinned) << "a pinned entry chosen";
      EXPECT_FALSE(taken && !p.target.empty() && e.meta.target != p.target) << "an entry outside the filter chosen";
      if (taken) {
        left_bytes -= e.size, left_n--, chosen_bytes += e.size;
        evicted.push_back(&e);
      } else if (!e.pinned && (p.target.empty() || e.meta.target == p.target)) {
        kept.push_back(&e);
      }
    }
    EXPECT_EQ(r->bytes, chosen_bytes);
    // Either both limits hold, or nothing evictable is left.
    bool holds = (!p.max_bytes || left_bytes <= *p.max_bytes) && (!p.max_entries || left_n <= *p.max_entries);
    EXPECT_TRUE(holds || kept.empty()) << "stopped early";
    if (p.target.empty() && p.max_bytes && *p.max_bytes >= pinned_bytes && (!p.max_entries || *p.max_entries >= pinned_n)) {
      EXPECT_TRUE(holds) << "the limits were reachable without the pinned entries";
    }
    // Least value first, ties least recently used first.
    for (const Entry* e : evicted) {
      for (const Entry* k : kept) {
        auto ve = value_order_key(entry_value(*e, k_now, p.value_window_ms));
        auto vk = value_order_key(entry_value(*k, k_now, p.value_window_ms));
        EXPECT_TRUE(ve < vk || (ve == vk && std::tie(e->last_access_ms, e->key) < std::tie(k->last_access_ms, k->key)))
            << e->key << " evicted before " << k->key;
      }
    }
    // No more than needed: without the last one chosen, the limits did not hold yet.
    if (!r->keys.empty()) {
      const Entry* last = evicted.front();
      for (const Entry* e : evicted) {
        if (e->key == r->keys.back()) last = e;
      }
      bool held_before = (!p.max_bytes || left_bytes + last->size <= *p.max_bytes) &&
                         (!p.max_entries || left_n + 1 <= *p.max_entries);
      EXPECT_FALSE(held_before) << "evicted past the limits";
    }
  }
}

TEST(SelectForEviction, LruOrderWithBothLimitsAndFilters) {
  std::vector<Entry> all = {entry(1000, 100, 0, 50), entry(1000, 200, 0, 40), entry(1000, 300, 0, 30),
                            entry(1000, 400, 0, 20)};
  for (std::size_t i = 0; i < all.size(); ++i) all[i].key = make_key("lru" + std::to_string(i));
  all[0].pinned = true;
  EvictPolicy p;
  p.max_entries = 2;
  auto r = select_for_eviction(all, p, 1000, 4, k_now);
  EXPECT_EQ(r->keys, (std::vector<std::string>{all[1].key, all[2].key})) << "the oldest unpinned first";
  p.max_bytes = 200;  // out of reach: only the pinned 100 bytes would be left
  r = select_for_eviction(all, p, 1000, 4, k_now);
  EXPECT_EQ(r->keys, (std::vector<std::string>{all[1].key, all[2].key, all[3].key}));
  EvictPolicy filter_only;
  filter_only.older_than_ms = 10;
  EXPECT_EQ(select_for_eviction(all, filter_only, 1000, 4, k_now)->keys.size(), 3u) << "every unpinned match";

  EXPECT_EQ(select_for_eviction(all, EvictPolicy{}, 1000, 4, k_now).error().code, Errc::invalid_argument);
  EvictPolicy bad_window;
  bad_window.max_entries = 1;
  bad_window.order = EvictOrder::value;
  bad_window.value_window_ms = 0;
  EXPECT_EQ(select_for_eviction(all, bad_window, 1000, 4, k_now).error().code, Errc::invalid_argument);
  bad_window.order = EvictOrder::lru;
  EXPECT_TRUE(select_for_eviction(all, bad_window, 1000, 4, k_now).ok()) << "the window matters only to value";
}

// Value-ordered pages, from make_page (redis) and page_of_index (memory,
// disk), concatenate to the whole (value, key) order at the first page's
// instant, with neither repeats nor gaps, whatever the page size.
TEST(ListByValue, PagesOfBothPathsMatchTheWholeOrder) {
  std::mt19937 rng(9);
  for (int round = 0; round < 40; ++round) {
    auto all = generate(rng, 1 + static_cast<int>(rng() % 80));
    for (std::size_t i = 0; i + 1 < all.size(); i += 7) {  // equal values: the key breaks the tie
      all[i].hits = all[i + 1].hits = 0;
      all[i + 1].meta.compile_ms = all[i].meta.compile_ms;
      all[i + 1].size = all[i].size;
    }
    std::map<std::string, Entry> index;
    for (const Entry& e : all) index.emplace(e.key, e);
    ListQuery q;
    q.sort = SortBy::value;
    q.descending = rng() % 2 == 0;
    q.limit = 1 + rng() % 9;
    // At least a day: the first pages of both paths compute values at their
    // own now, a millisecond apart at most, which changes no order then.
    q.value_window_ms = static_cast<std::int64_t>(k_day + rng() % (10 * k_day));
    if (rng() % 3 == 0) q.target = "cpu";
    std::vector<std::string> from_make, from_index;
    std::int64_t at = 0;
    for (int page = 0; page < 200; ++page) {
      auto a = make_page(all, q);
      auto b = page_of_index(index, q, [](const Entry& e) -> const Entry& { return e; });
      ASSERT_TRUE(a.ok() && b.ok());
      // The same last entry; on a first page each path computes values at
      // its own now (a millisecond may separate them, and every value decays
      // with age, so the cursors' values may differ in their last bits while
      // the order does not), later pages at the cursor's instant.
      auto last_key = [](const std::string& c) { return c.substr(c.find('/') + 1); };
      ASSERT_EQ(last_key(a->next_cursor), last_key(b->next_cursor));
      if (page > 0) {
        ASSERT_EQ(a->next_cursor, b->next_cursor);
      }
      for (const Entry& e : a->entries) from_make.push_back(e.key);
      for (const Entry& e : b->entries) from_index.push_back(e.key);
      if (a->next_cursor.empty()) break;
      auto pos = parse_list_cursor([&] {
        ListQuery c = q;
        c.cursor = a->next_cursor;
        return c;
      }());
      ASSERT_TRUE(pos.ok() && *pos);
      at = (*pos)->at_ms;
      q.cursor = a->next_cursor;
    }
    EXPECT_EQ(from_make, from_index);
    if (at == 0) continue;  // one page: its instant was now
    std::vector<std::pair<std::int64_t, std::string>> want;
    for (const Entry& e : all) {
      if (!q.target.empty() && e.meta.target != q.target) continue;
      want.emplace_back(value_order_key(entry_value(e, at, q.value_window_ms)), e.key);
    }
    std::sort(want.begin(), want.end());
    if (q.descending) std::reverse(want.begin(), want.end());
    std::vector<std::string> want_keys;
    for (auto& [v, k] : want) want_keys.push_back(k);
    EXPECT_EQ(from_make, want_keys) << "round " << round;
  }
}

TEST(ListByValue, CursorsAreChecked) {
  ListQuery q;
  q.sort = SortBy::value;
  std::string k = make_key("c");
  for (const std::string& bad : {"1/" + k, "x@1/" + k, "1@x/" + k, "1@/" + k, "@1/" + k, std::string("1@2/zz"), k}) {
    q.cursor = bad;
    EXPECT_EQ(parse_list_cursor(q).error().code, Errc::invalid_argument) << bad;
  }
  q.cursor = "5@1700000000000/" + k;
  auto pos = parse_list_cursor(q);
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ((*pos)->value, 5);
  EXPECT_EQ((*pos)->at_ms, 1700000000000);
  q.sort = SortBy::size;
  EXPECT_EQ(parse_list_cursor(q).error().code, Errc::invalid_argument) << "a value cursor is no size cursor";
}

}  // namespace
}  // namespace kcache::storage
