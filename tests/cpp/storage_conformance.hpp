// The storage conformance suite's fixture (tests/cpp/storage_conformance_test.cpp
// and storage_conformance_upkeep_test.cpp): one backend per case, of each of
// memory, disk, redis and redis-cluster, and the helpers its cases share.
// Each case runs in its own process (gtest_discover_tests), which starts the
// redis-server or the cluster it stores in on first use.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "redis_cluster_util.hpp"
#include "storage/capabilities.hpp"
#include "storage/disk/backend.hpp"
#include "storage/memory/backend.hpp"
#include "storage/redis/backend.hpp"
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

inline EntryMeta meta(std::string label, std::string target = "cpu", std::string mode = "default",
               std::string toolchain = "tc1") {
  return EntryMeta{std::move(label), std::move(target), std::move(mode), "f32", std::move(toolchain), 42};
}

inline std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

inline void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

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

  // The URI open_backend() opens this case's store from (the disk store is
  // the fixture's dir_/store).
  std::string uri() {
    if (GetParam() == "memory") return "memory:";
    if (GetParam() == "disk") return "disk:" + dir_.path() + "/store";
    return redis_server().url();
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

// Every case on every backend; gtest names allow no '-'.
#define KCACHE_STORAGE_CONFORMANCE_BACKENDS()                                                                       \
  INSTANTIATE_TEST_SUITE_P(Backends, StorageConformance,                                                           \
                           ::testing::Values("memory", "disk", "redis", "redis-cluster"), [](const auto& info) { \
                             std::string name = info.param;                                                        \
                             std::replace(name.begin(), name.end(), '-', '_');                                    \
                             return name;                                                                          \
                           })

}  // namespace
}  // namespace kcache::storage
