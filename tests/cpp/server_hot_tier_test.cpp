// HotTier (server/hot_tier.hpp): LRU bound, per-object limit, erase, touch pacing.
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
  t.put("a", bytes(100, 1));
  t.put("b", bytes(100, 2));
  ASSERT_TRUE(t.get("a"));  // a is now the most recent
  t.put("c", bytes(100, 3));
  t.put("d", bytes(100, 4));  // over budget: b, the least recent, goes
  EXPECT_FALSE(t.get("b"));
  EXPECT_TRUE(t.get("a"));
  EXPECT_EQ(t.get("d")->front(), 4);
  EXPECT_LE(t.bytes(), 300u);
  t.put("huge", bytes(201));
  EXPECT_FALSE(t.get("huge"));
  t.erase("a");
  EXPECT_FALSE(t.get("a"));
}

TEST(HotTier, DisabledWithNoBudget) {
  HotTier t(0, 0);
  EXPECT_FALSE(t.enabled());
  t.put("a", bytes(1));
  EXPECT_FALSE(t.get("a"));
}

TEST(HotTier, TouchAtMostOncePerInterval) {
  HotTier t(1000, 1000);
  EXPECT_FALSE(t.needs_touch("a"));  // absent
  t.put("a", bytes(10));
  EXPECT_FALSE(t.needs_touch("a", std::chrono::milliseconds(50)));  // just read from the backend
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(t.needs_touch("a", std::chrono::milliseconds(50)));
  EXPECT_FALSE(t.needs_touch("a", std::chrono::milliseconds(50)));
}

}  // namespace
}  // namespace kcache::server
