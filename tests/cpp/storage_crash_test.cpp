// Crash safety: a child process puts through a PutFaultHook that signals the
// parent and then hangs between the temp write and the publish; the parent
// SIGKILLs it there (provably mid-put) and checks that only complete,
// verifiable entries exist afterwards, and that no temp files (disk, after
// the next open) or temp keys (redis, after their TTL) remain.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "storage/disk/backend.hpp"
#include "storage/redis/backend.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

namespace fs = std::filesystem;
using testing::make_bytes;
using testing::make_key;
using Bytes = std::vector<std::uint8_t>;

const EntryMeta k_meta{"Blk/cpu", "cpu", "default", "f32", "tc", 7};

// Writes one byte to `fd` and hangs when the put of `key` reaches its publish.
class SignalAndHang final : public PutFaultHook {
 public:
  SignalAndHang(int fd, std::string key) : fd_(fd), key_(std::move(key)) {}
  void before_publish(const std::string& key) override {
    if (key != key_) return;
    (void)!::write(fd_, "p", 1);
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }

 private:
  int fd_;
  std::string key_;
};

// Forks a child that runs `child(hook)` (it must hang in the hook), waits for
// the hook's signal, runs `while_paused`, then SIGKILLs the child.
void kill_mid_put(const std::string& key, const std::function<void(std::shared_ptr<PutFaultHook>)>& child,
                  const std::function<void()>& while_paused) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(p[0]);
    child(std::make_shared<SignalAndHang>(p[1], key));
    ::_exit(3);  // the hook should have hung
  }
  ::close(p[1]);
  pollfd pfd{p[0], POLLIN, 0};
  bool paused = ::poll(&pfd, 1, 20000) == 1 && (pfd.revents & POLLIN);
  char c = 0;
  paused = paused && ::read(p[0], &c, 1) == 1;
  if (paused) while_paused();
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(p[0]);
  ASSERT_TRUE(paused) << "the child never reached the publish point";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

bool accept_all(const std::string&, const Bytes&) { return true; }

TEST(StorageCrash, DiskPutKilledBeforePublish) {
  testing::TempDir dir;
  std::string done = make_key("complete"), torn = make_key("torn");
  Bytes done_bytes = make_bytes(300000, 1);
  kill_mid_put(
      torn,
      [&](std::shared_ptr<PutFaultHook> hook) {
        DiskOptions o;
        o.root = dir.path();
        o.fault_hook = std::move(hook);
        auto b = open_disk_backend(o);
        if (!b || !(*b)->put(done, done_bytes, k_meta)) ::_exit(2);
        (void)(*b)->put(torn, make_bytes(500000, 2), k_meta);
      },
      [&] {
        // Mid-put: both temp files are written and fsynced, nothing published.
        EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() + "/tmp"), fs::directory_iterator{}), 2);
      });
  DiskOptions o;
  o.root = dir.path();
  auto b = open_disk_backend(o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_TRUE(fs::is_empty(dir.path() + "/tmp")) << "orphan temp files survived the restart";
  EXPECT_EQ((*b)->get(done).value(), done_bytes);
  EXPECT_EQ((*b)->get(torn).error().code, Errc::not_found);
  EXPECT_EQ((*b)->usage()->entries, 1u);
  auto v = (*b)->verify(accept_all, true);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->checked, 1u);
  EXPECT_TRUE(v->corrupt.empty());
  // The interrupted key can be stored now.
  EXPECT_EQ((*b)->put(torn, make_bytes(10, 3), k_meta).value(), PutOutcome::stored);
}

TEST(StorageCrash, RedisPutKilledBeforePublish) {
  testing::RedisServer server;
  std::string done = make_key("complete"), torn = make_key("torn");
  Bytes done_bytes = make_bytes(1500000, 1);  // two chunks
  auto options = parse_redis_url(server.url());
  ASSERT_TRUE(options.ok());
  options->temp_ttl = std::chrono::milliseconds(800);
  auto scan = [&](const std::string& key) {
    return server.cli("--scan --pattern 'kcache:{" + key + "}:*'");
  };
  kill_mid_put(
      torn,
      [&](std::shared_ptr<PutFaultHook> hook) {
        RedisOptions o = *options;
        o.fault_hook = std::move(hook);
        auto b = open_redis_backend(o);
        if (!b || !(*b)->put(done, done_bytes, k_meta)) ::_exit(2);
        (void)(*b)->put(torn, make_bytes(2500000, 2), k_meta);
      },
      [&] {
        std::string keys = scan(torn);  // three temp chunks, no meta, no chunk
        EXPECT_EQ(std::count(keys.begin(), keys.end(), '\n'), 3) << keys;
        EXPECT_EQ(keys.find(":meta"), std::string::npos);
        EXPECT_NE(keys.find(":tmp:"), std::string::npos);
      });
  auto b = open_redis_backend(*options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ((*b)->get(done).value(), done_bytes);
  EXPECT_EQ((*b)->head(torn).error().code, Errc::not_found);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // > temp_ttl
  EXPECT_EQ(scan(torn), "") << "temp keys outlived their TTL";
  auto v = (*b)->verify(accept_all, true);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->checked, 1u);
  EXPECT_TRUE(v->corrupt.empty());
  EXPECT_EQ((*b)->usage()->entries, 1u);
}

TEST(StorageCrash, EnvironmentHookPausesPuts) {
  testing::TempDir dir;
  ::setenv("KCACHE_FAULT_PAUSE_PUT_MS", "300", 1);
  auto b = open_backend("disk:" + dir.path(), 0);
  ::unsetenv("KCACHE_FAULT_PAUSE_PUT_MS");
  ASSERT_TRUE(b.ok());
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE((*b)->put(make_key("slow"), make_bytes(10, 1), k_meta).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
}

}  // namespace
}  // namespace kcache::storage
