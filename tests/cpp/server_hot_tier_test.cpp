// HotTier (server/hot_tier.hpp): LRU bound, per-object limit, erase, touch pacing,
// fills that raced an erase.
#include <gtest/gtest.h>

#include <thread>

#include "server/hot_tier.hpp"

namespace kcache::server {
namespace {

HotTier::Bytes bytes(std::size_t n, std::uint8_t fill = 1) {
  return std::make_shared<const std::vector<std::uint8_t>>(n, fill);
}

TEST(HotTier, KeepsRecentWithinBudget) {
  HotTier t(300, 200);
  t.put("a", bytes(100, 1), t.generation());
  t.put("b", bytes(100, 2), t.generation());
  ASSERT_TRUE(t.get("a"));  // a is now the most recent
  t.put("c", bytes(100, 3), t.generation());
  t.put("d", bytes(100, 4), t.generation());  // over budget: b, the least recent, goes
  EXPECT_FALSE(t.get("b"));
  EXPECT_TRUE(t.get("a"));
  EXPECT_EQ(t.get("d")->front(), 4);
  EXPECT_LE(t.bytes(), 300u);
  t.put("huge", bytes(201), t.generation());
  EXPECT_FALSE(t.get("huge"));
  t.erase("a");
  EXPECT_FALSE(t.get("a"));
}

TEST(HotTier, DisabledWithNoBudget) {
  HotTier t(0, 0);
  EXPECT_FALSE(t.enabled());
  t.put("a", bytes(1), t.generation());
  EXPECT_FALSE(t.get("a"));
}

TEST(HotTier, TouchAtMostOncePerInterval) {
  HotTier t(1000, 1000);
  EXPECT_FALSE(t.needs_touch("a"));  // absent
  t.put("a", bytes(10), t.generation());
  // The FALSE checks use an hour, so a stalled machine cannot pass the
  // interval between two lines; the TRUE one follows a sleep longer than it.
  EXPECT_FALSE(t.needs_touch("a", std::chrono::hours(1)));  // just read from the backend
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(t.needs_touch("a", std::chrono::milliseconds(50)));
  EXPECT_FALSE(t.needs_touch("a", std::chrono::hours(1)));  // touched just now
}

TEST(HotTier, AFillThatRacedAnEraseIsDropped) {
  HotTier t(1000, 1000);
  const auto before_read = t.generation();
  t.erase("a");  // a DEL or an overwrite lands while the old bytes are read
  t.put("a", bytes(10, 7), before_read);
  EXPECT_FALSE(t.get("a"));  // the old bytes do not come back
  t.put("a", bytes(10, 8), t.generation());
  ASSERT_TRUE(t.get("a"));
  EXPECT_EQ(t.get("a")->front(), 8);
  // An erase of another key drops a racing fill too (one generation for all).
  const auto g = t.generation();
  t.erase("b");
  t.put("c", bytes(10), g);
  EXPECT_FALSE(t.get("c"));
}

}  // namespace
}  // namespace kcache::server
