// The node tier: atomic first-writer-wins publish, corrupt objects deleted,
// LRU trim, the per-key lock; and the node-only client on top of it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "artifact/bundle.hpp"
#include "client/client.hpp"
#include "client/node_tier.hpp"
#include "common/hex.hpp"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using client::NodeTier;

std::string random_key() {
  static std::mt19937_64 rng{std::random_device{}()};
  std::vector<std::uint8_t> b(32);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return to_hex(b);
}

std::vector<std::uint8_t> make_bundle(const std::string& key, std::size_t payload = 64,
                                      double seconds = 2.0) {
  nlohmann::json m = {
      {"key", key}, {"label", "T/cpu/f32/default/train"}, {"compile_seconds", seconds}};
  std::vector<std::uint8_t> data(payload);
  for (std::size_t i = 0; i < payload; ++i) data[i] = static_cast<std::uint8_t>(i * 7 + key[0]);
  auto r = artifact::write_bundle(m, {{"mega_cache", data}});
  EXPECT_TRUE(r.ok());
  return *r;
}

class NodeTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("kcache-node-" + std::to_string(::getpid()) + "-" + random_key().substr(0, 8));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(NodeTierTest, PublishIsFirstWriterWinsAndLeavesNoTempFiles) {
  NodeTier tier(root_.string(), 0);
  auto key = random_key();
  EXPECT_FALSE(tier.read(key).has_value());
  auto a = make_bundle(key, 10);
  auto b = make_bundle(key, 20);
  ASSERT_TRUE(*tier.publish(key, a));
  ASSERT_FALSE(*tier.publish(key, b));  // already present: unchanged
  EXPECT_EQ(*tier.read(key), a);
  EXPECT_EQ(tier.object_path(key), root_.string() + "/objects/" + key.substr(0, 2) + "/" + key);
  for (const auto& e : fs::directory_iterator(root_ / "objects" / key.substr(0, 2))) {
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
  }
}

TEST_F(NodeTierTest, ConcurrentPublishersExactlyOneWins) {
  NodeTier tier(root_.string(), 0);
  auto key = random_key();
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<std::uint8_t>> bundles;
  for (int i = 0; i < 8; ++i)
    bundles.push_back(make_bundle(key, 100 + static_cast<std::size_t>(i)));
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = tier.publish(key, bundles[static_cast<std::size_t>(i)]);
      if (r.ok() && *r) winners.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
  auto got = tier.read(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(std::find(bundles.begin(), bundles.end(), *got) !=
              bundles.end());  // one whole bundle
}

TEST_F(NodeTierTest, TrimEvictsLeastRecentlyUsedToNinetyPercent) {
  auto key_old = random_key(), key_mid = random_key(), key_new = random_key();
  NodeTier unlimited(root_.string(), 0);
  auto bo = make_bundle(key_old, 4000), bm = make_bundle(key_mid, 4000),
       bn = make_bundle(key_new, 4000);
  ASSERT_TRUE(*unlimited.publish(key_old, bo));
  ASSERT_TRUE(*unlimited.publish(key_mid, bm));
  ASSERT_TRUE(*unlimited.publish(key_new, bn));
  // Age them: old < mid < new.
  auto age = [&](const std::string& key, int seconds_ago) {
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = ::time(nullptr) - seconds_ago;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ASSERT_EQ(::utimensat(AT_FDCWD, unlimited.object_path(key).c_str(), ts, 0), 0);
  };
  age(key_old, 3000);
  age(key_mid, 2000);
  age(key_new, 1000);
  std::uint64_t total = bo.size() + bm.size() + bn.size();
  // Budget fits two objects but not three; 90% of it still fits two.
  NodeTier tier(root_.string(), (bo.size() + bm.size()) * 100 / 89);
  auto report = tier.trim();
  EXPECT_EQ(report.bytes_before, total);
  EXPECT_EQ(report.removed, 1u);
  EXPECT_FALSE(tier.read(key_old).has_value());
  EXPECT_TRUE(tier.read(key_mid).has_value());
  EXPECT_TRUE(tier.read(key_new).has_value());
}

TEST_F(NodeTierTest, ReadRefreshesRecencySoHotObjectsSurviveTrim) {
  auto hot = random_key(), cold = random_key();
  NodeTier unlimited(root_.string(), 0);
  auto bh = make_bundle(hot, 4000), bc = make_bundle(cold, 4000);
  ASSERT_TRUE(*unlimited.publish(hot, bh));
  ASSERT_TRUE(*unlimited.publish(cold, bc));
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = ::time(nullptr) - 5000;  // hot is older...
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, unlimited.object_path(hot).c_str(), ts, 0), 0);
  ts[0].tv_sec = ts[1].tv_sec = ::time(nullptr) - 4000;
  ASSERT_EQ(::utimensat(AT_FDCWD, unlimited.object_path(cold).c_str(), ts, 0), 0);
  ASSERT_TRUE(unlimited.read(hot).has_value());  // ...but was just read
  NodeTier tier(root_.string(), bh.size() + 100);
  tier.trim();
  EXPECT_TRUE(tier.read(hot).has_value());
  EXPECT_FALSE(tier.read(cold).has_value());
}

TEST_F(NodeTierTest, PublishTrimsToTheBudget) {
  NodeTier tier(root_.string(), 10000);
  for (int i = 0; i < 10; ++i) {
    auto k = random_key();
    ASSERT_TRUE(tier.publish(k, make_bundle(k, 3000)).ok());
  }
  EXPECT_LE(tier.trim().bytes_after, 10000u);
}

TEST_F(NodeTierTest, LockExcludesOtherHoldersUntilReleased) {
  NodeTier tier(root_.string(), 0);
  auto key = random_key();
  auto far = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto first = tier.lock(key, far);
  ASSERT_TRUE(first.has_value());
  auto t0 = std::chrono::steady_clock::now();
  auto second = tier.lock(key, t0 + std::chrono::milliseconds(100));
  EXPECT_FALSE(second.has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    first.reset();
  });
  auto third = tier.lock(key, far);
  releaser.join();
  EXPECT_TRUE(third.has_value());
}

ClientConfig node_only(const fs::path& root) {
  ClientConfig c;
  c.local_dir = root.string();
  c.miss_log = "none";
  c.log_level = "error";
  return c;
}

TEST_F(NodeTierTest, ClientDeletesACorruptObjectAndRecompiles) {
  auto client = Client::create(node_only(root_));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto key = random_key();
  auto bundle = make_bundle(key, 500);
  int compiles = 0;
  auto compile = [&]() -> Result<std::vector<std::uint8_t>> {
    ++compiles;
    return bundle;
  };
  auto first = (*client)->get_or_compile(key, compile);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->source, Source::compiled);
  auto again = (*client)->get_or_compile(key, compile);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, Source::node);
  EXPECT_EQ(compiles, 1);

  // Flip one byte in the published object.
  std::string path = root_.string() + "/objects/" + key.substr(0, 2) + "/" + key;
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    char c = 0;
    f.seekg(100);
    f.get(c);
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  auto got = (*client)->get(key);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_FALSE(fs::exists(path));  // deleted
  EXPECT_EQ((*client)->stats().refused, 1u);

  auto recompiled = (*client)->get_or_compile(key, compile);
  ASSERT_TRUE(recompiled.ok());
  EXPECT_EQ(recompiled->source, Source::compiled);
  EXPECT_EQ(recompiled->bundle, bundle);
  EXPECT_EQ(compiles, 2);
  auto s = (*client)->stats();
  EXPECT_EQ(s.node_hits, 1u);
  EXPECT_DOUBLE_EQ(s.compile_seconds_saved, 2.0);
}

TEST_F(NodeTierTest, PutReplacesACorruptObjectButKeepsAGoodOne) {
  auto client = Client::create(node_only(root_));
  ASSERT_TRUE(client.ok()) << client.error().message;
  NodeTier tier(root_.string(), 0);
  auto key = random_key();
  auto good = make_bundle(key, 500);
  auto corrupt = good;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  ASSERT_TRUE(*tier.publish(key, corrupt));  // a corrupt object is already there
  ASSERT_TRUE((*client)->put(key, good).ok());
  EXPECT_EQ(*tier.read(key), good);  // replaced, not kept
  EXPECT_EQ((*client)->stats().refused, 1u);

  auto other = make_bundle(key, 300);  // another valid bundle for the same key
  ASSERT_TRUE((*client)->put(key, other).ok());
  EXPECT_EQ(*tier.read(key), good);  // first valid writer wins
  EXPECT_EQ((*client)->stats().refused, 1u);
}

TEST_F(NodeTierTest, ABundleForAnotherKeyIsRefused) {
  auto client = Client::create(node_only(root_));
  ASSERT_TRUE(client.ok());
  auto key = random_key(), other = random_key();
  NodeTier tier(root_.string(), 0);
  // Planted directly: the object under `key` is a valid bundle for `other`.
  ASSERT_TRUE(*tier.publish(key, make_bundle(other)));
  auto got = (*client)->get(key);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_FALSE(tier.read(key).has_value());
}

TEST_F(NodeTierTest, CallbackFailureAndBadBundlesAreErrorsNotExceptions) {
  auto client = Client::create(node_only(root_));
  ASSERT_TRUE(client.ok());
  auto key = random_key();
  auto failed = (*client)->get_or_compile(
      key, [] { return Result<std::vector<std::uint8_t>>(make_error(Errc::internal, "boom")); });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "boom");
  auto threw = (*client)->get_or_compile(
      key, []() -> Result<std::vector<std::uint8_t>> { throw std::runtime_error("bang"); });
  ASSERT_FALSE(threw.ok());
  EXPECT_NE(threw.error().message.find("bang"), std::string::npos);
  auto garbage = (*client)->get_or_compile(
      key, [] { return Result<std::vector<std::uint8_t>>(std::vector<std::uint8_t>{1, 2, 3}); });
  ASSERT_FALSE(garbage.ok());
  auto other = (*client)->get_or_compile(
      key, [&] { return Result<std::vector<std::uint8_t>>(make_bundle(random_key())); });
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, Errc::key_mismatch);
  EXPECT_FALSE(
      (*client)
          ->get_or_compile(
              "not-a-key",
              [] { return Result<std::vector<std::uint8_t>>(std::vector<std::uint8_t>{}); })
          .ok());
  EXPECT_EQ((*client)->stats().compile_failures, 4u);
}

TEST_F(NodeTierTest, ThreadsOfOneProcessCompileOnce) {
  auto client = Client::create(node_only(root_));
  ASSERT_TRUE(client.ok());
  auto key = random_key();
  auto bundle = make_bundle(key, 1000);
  std::atomic<int> compiles{0};
  std::vector<std::thread> threads;
  std::vector<Source> sources(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = (*client)->get_or_compile(key, [&]() -> Result<std::vector<std::uint8_t>> {
        compiles.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return bundle;
      });
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->bundle, bundle);
      sources[static_cast<std::size_t>(i)] = r->source;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(std::count(sources.begin(), sources.end(), Source::node), 7);
}

// try_get_or_compile (a rank's compile worker, docs/cold-start.md): a key
// whose node lock a sibling holds comes back empty at once, with nothing
// compiled; the caller takes another key meanwhile, and finds the first
// one stored once the sibling is done.
TEST_F(NodeTierTest, TryGetOrCompileTakesOtherWorkWhileASiblingHoldsTheLock) {
  auto client = Client::create(node_only(root_));
  ASSERT_TRUE(client.ok());
  auto busy_key = random_key(), free_key = random_key();
  auto busy_bundle = make_bundle(busy_key), free_bundle = make_bundle(free_key);
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  std::thread sibling([&] {
    auto r = (*client)->get_or_compile(busy_key, [&]() -> Result<std::vector<std::uint8_t>> {
      entered.set_value();
      released.wait();
      return busy_bundle;
    });
    EXPECT_TRUE(r.ok());
  });
  entered.get_future().wait();
  int compiled = 0;
  auto never = [&]() -> Result<std::vector<std::uint8_t>> {
    ++compiled;
    return busy_bundle;
  };
  for (int i = 0; i < 3; ++i) {
    auto r = (*client)->try_get_or_compile(busy_key, never);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value());
  }
  EXPECT_EQ(compiled, 0);
  auto other = (*client)->try_get_or_compile(free_key, [&]() -> Result<std::vector<std::uint8_t>> {
    return free_bundle;
  });
  ASSERT_TRUE(other.ok() && other->has_value());
  EXPECT_EQ((*other)->source, Source::compiled);
  release.set_value();
  sibling.join();
  auto landed = (*client)->try_get_or_compile(busy_key, never);
  ASSERT_TRUE(landed.ok() && landed->has_value());
  EXPECT_EQ((*landed)->source, Source::node);
  EXPECT_EQ((*landed)->bundle, busy_bundle);
  EXPECT_EQ(compiled, 0);
  auto found = (*client)->lookup(free_key);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->source, Source::node);
  auto stats = (*client)->stats();
  EXPECT_EQ(stats.lease_busy, 3u);
  EXPECT_EQ(stats.compiles, 2u);  // the sibling's and the free key's
}

TEST_F(NodeTierTest, SigningAndTrust) {
  auto kp = artifact::generate_key_pair();
  auto other = artifact::generate_key_pair();
  ASSERT_TRUE(kp.ok() && other.ok());
  auto key = random_key();
  // A trusting client refuses an unsigned object and signs what it compiles.
  auto cfg = node_only(root_);
  cfg.trusted_keys = {kp->public_pem};
  cfg.signing_key = kp->private_pem;
  auto client = Client::create(cfg);
  ASSERT_TRUE(client.ok()) << client.error().message;
  NodeTier tier(root_.string(), 0);
  ASSERT_TRUE(*tier.publish(key, make_bundle(key)));
  auto got = (*client)->get(key);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());  // unsigned: refused and deleted
  auto r = (*client)->get_or_compile(
      key, [&] { return Result<std::vector<std::uint8_t>>(make_bundle(key)); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  artifact::TrustStore trust;
  ASSERT_TRUE(trust.add_public_pem(kp->public_pem).ok());
  artifact::ReadOptions o;
  o.trust = &trust;
  o.require_signature = true;
  EXPECT_TRUE(artifact::read_bundle(r->bundle, o).ok());
  auto hit = (*client)->get_or_compile(
      key, [] { return Result<std::vector<std::uint8_t>>(make_error(Errc::internal, "no")); });
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->source, Source::node);

  // A client trusting only another key refuses it.
  auto cfg2 = node_only(root_);
  cfg2.trusted_keys = {other->public_pem};
  auto strict = Client::create(cfg2);
  ASSERT_TRUE(strict.ok());
  auto refused = (*strict)->get(key);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->has_value());
  EXPECT_EQ((*strict)->stats().refused, 1u);
}

TEST_F(NodeTierTest, DisabledClientJustCompiles) {
  auto cfg = node_only(root_);
  cfg.disabled = true;
  auto client = Client::create(cfg);
  ASSERT_TRUE(client.ok());
  auto key = random_key();
  auto r = (*client)->get_or_compile(
      key, [&] { return Result<std::vector<std::uint8_t>>(make_bundle(key)); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, Source::local);
  EXPECT_FALSE(fs::exists(root_ / "objects"));
}

}  // namespace
}  // namespace kcache
