// Disk backend specifics: persistence across reopen, startup repair, the
// first-read-after-restart check, background eviction between watermarks,
// single ownership of a root, and a full filesystem (a real tmpfs).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <utility>

#include "storage/disk/backend.hpp"
#include "storage/fault_hook.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

namespace fs = std::filesystem;
using testing::make_bytes;
using testing::make_key;
using Bytes = std::vector<std::uint8_t>;

const EntryMeta k_meta{"Blk/cpu", "cpu", "default", "f32", "tc", 7};

std::unique_ptr<Backend> open_at(const std::string& root, std::uint64_t capacity = 0,
                                 double high = 0.9, double low = 0.8) {
  DiskOptions o;
  o.root = root;
  o.capacity_bytes = capacity;
  o.high_watermark = high;
  o.low_watermark = low;
  auto b = open_disk_backend(o);
  EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
  return b ? std::move(b.value()) : nullptr;
}

std::string object_path(const std::string& root, const std::string& key) {
  return root + "/objects/" + key.substr(0, 2) + "/" + key;
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 1));
}

std::uint64_t object_bytes_on_disk(const std::string& root) {
  std::uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(root + "/objects")) {
    if (e.is_regular_file() && e.path().extension() != ".meta") total += e.file_size();
  }
  return total;
}

TEST(DiskBackend, ReopenKeepsEntriesAndAccessStats) {
  testing::TempDir dir;
  std::string a = make_key("a"), b = make_key("b");
  Bytes da = make_bytes(5000, 1), db = make_bytes(7000, 2);
  {
    auto s = open_at(dir.path());
    ASSERT_TRUE(s->put(a, da, k_meta).ok());
    ASSERT_TRUE(s->put(b, db, k_meta).ok());
    ASSERT_TRUE(s->get(a).ok());
    ASSERT_TRUE(s->get(a).ok());
    EXPECT_EQ(object_bytes_on_disk(dir.path()), s->usage()->bytes);
  }
  auto s = open_at(dir.path());
  EXPECT_EQ(s->usage()->entries, 2u);
  EXPECT_EQ(s->usage()->bytes, 12000u);
  EXPECT_EQ(s->head(a)->hits, 2u);  // written back at close
  EXPECT_EQ(s->head(a)->meta.label, "Blk/cpu");
  EXPECT_EQ(s->get(a).value(), da);
  EXPECT_EQ(s->get(b).value(), db);
}

TEST(DiskBackend, ASecondOpenOfTheDirectoryIsRefusedUntilTheFirstCloses) {
  testing::TempDir dir;
  std::string a = make_key("a");
  auto first = open_at(dir.path());
  ASSERT_TRUE(first->put(a, make_bytes(100, 1), k_meta).ok());
  DiskOptions o;
  o.root = dir.path();
  auto second = open_disk_backend(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, Errc::unavailable);
  EXPECT_NE(second.error().message.find("in use by another kcache process"), std::string::npos);
  EXPECT_TRUE(first->get(a).ok());  // the refused open changed nothing
  first.reset();                     // closing releases the lock
  auto third = open_at(dir.path());
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->usage()->entries, 1u);
}

TEST(DiskBackend, StartupRemovesTempFilesAndIncompleteEntries) {
  testing::TempDir dir;
  std::string good = make_key("good"), half = make_key("half"), lonely = make_key("lonely");
  { ASSERT_TRUE(open_at(dir.path())->put(good, make_bytes(100, 1), k_meta).ok()); }
  std::ofstream(dir.path() + "/tmp/" + half + ".0123.obj") << "partial";
  std::ofstream(object_path(dir.path(), half)) << "linked but never committed";
  std::ofstream(object_path(dir.path(), lonely) + ".meta") << "{}";
  auto s = open_at(dir.path());
  EXPECT_TRUE(fs::is_empty(dir.path() + "/tmp"));
  EXPECT_FALSE(fs::exists(object_path(dir.path(), half)));
  EXPECT_FALSE(fs::exists(object_path(dir.path(), lonely) + ".meta"));
  EXPECT_EQ(s->usage()->entries, 1u);
  EXPECT_EQ(s->head(half).error().code, Errc::not_found);
  EXPECT_TRUE(s->get(good).ok());
}

TEST(DiskBackend, FirstReadAfterRestartIsVerified) {
  testing::TempDir dir;
  std::string k = make_key("k");
  {
    auto s = open_at(dir.path());
    ASSERT_TRUE(s->put(k, make_bytes(4096, 3), k_meta).ok());
    ASSERT_TRUE(s->get(k).ok());  // verified in this process
  }
  flip_byte(object_path(dir.path(), k), 100);  // bit rot while the server was down
  auto s = open_at(dir.path());
  auto got = s->get(k);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::corrupt);
  EXPECT_EQ(s->head(k).error().code, Errc::not_found);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() + "/quarantine"), fs::directory_iterator{}), 2);
}

TEST(DiskBackend, ScrubFindsRotInAVerifiedObject) {
  testing::TempDir dir;
  std::string k = make_key("k");
  auto s = open_at(dir.path());
  ASSERT_TRUE(s->put(k, make_bytes(4096, 3), k_meta).ok());
  ASSERT_TRUE(s->get(k).ok());
  flip_byte(object_path(dir.path(), k), 7);
  auto r = s->verify([](const std::string&, const Bytes&) { return true; }, /*remove=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->corrupt, std::vector<std::string>{k});
  EXPECT_EQ(r->removed, 1u);
  EXPECT_EQ(s->get(k).error().code, Errc::not_found);
  EXPECT_FALSE(fs::is_empty(dir.path() + "/quarantine"));
}

TEST(DiskBackend, BackgroundEvictionBetweenWatermarks) {
  testing::TempDir dir;
  auto s = open_at(dir.path(), 10000, 0.9, 0.5);
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(make_key("w" + std::to_string(i)));
    ASSERT_TRUE(s->put(keys.back(), make_bytes(950, i), k_meta).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Usage drops when an entry is claimed for eviction, just before its file
  // is unlinked: wait until the files agree too, not only the count.
  for (int i = 0; i < 500 && (s->usage()->bytes > 5000 ||
                              object_bytes_on_disk(dir.path()) != s->usage()->bytes); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto u = s->usage();
  EXPECT_LE(u->bytes, 5000u);
  EXPECT_EQ(u->entries, 5u);  // 10 * 950 = 9500 > 9000; evicts down to <= 5000
  for (int i = 5; i < 10; ++i) EXPECT_TRUE(s->head(keys[i]).ok()) << "recent entry " << i << " evicted";
  EXPECT_EQ(object_bytes_on_disk(dir.path()), u->bytes);
}

TEST(DiskBackend, OneProcessPerRoot) {
  testing::TempDir dir;
  auto first = open_at(dir.path());
  DiskOptions o;
  o.root = dir.path();
  auto second = open_disk_backend(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, Errc::unavailable);
}

TEST(DiskBackend, FullFilesystemFailsThePutAndKeepsEntries) {
  testing::TempDir dir;
  std::string mnt = dir.path() + "/small";
  fs::create_directory(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a 2 MiB tmpfs here (needs root / CAP_SYS_ADMIN): " << std::strerror(errno);
  }
  std::vector<std::pair<std::string, Bytes>> kept;
  {
    auto s = open_at(mnt);
    for (int i = 0; i < 3; ++i) {
      kept.emplace_back(make_key("kept" + std::to_string(i)), make_bytes(400 * 1024, i));
      ASSERT_TRUE(s->put(kept.back().first, kept.back().second, k_meta).ok());
    }
    auto r = s->put(make_key("too-big"), make_bytes(1024 * 1024, 9), k_meta);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::full) << r.error().message;
    EXPECT_TRUE(fs::is_empty(mnt + "/tmp")) << "the failed put left temp files";
    for (const auto& [k, bytes] : kept) EXPECT_EQ(s->get(k).value(), bytes);
    EXPECT_EQ(s->usage()->entries, 3u);
  }
  auto s = open_at(mnt);  // and after a restart
  for (const auto& [k, bytes] : kept) EXPECT_EQ(s->get(k).value(), bytes);
  s.reset();
  ::umount2(mnt.c_str(), MNT_DETACH);
}


// Fault hook for the tests below: a failing directory fsync, or work done
// between a get()'s read of the bytes and their check.
class DiskFaults final : public PutFaultHook {
 public:
  void before_publish(const std::string&) override {}
  int dir_sync_errno(const std::string&) override { return fail_dir_sync ? EIO : 0; }
  void after_read(const std::string& key) override {
    if (on_read) std::exchange(on_read, nullptr)(key);
  }
  bool fail_dir_sync = false;
  std::function<void(const std::string&)> on_read;
};

std::unique_ptr<Backend> open_with(const std::string& root, std::shared_ptr<PutFaultHook> hook) {
  DiskOptions o;
  o.root = root;
  o.fault_hook = std::move(hook);
  auto b = open_disk_backend(o);
  EXPECT_TRUE(b.ok()) << (b ? "" : b.error().message);
  return b ? std::move(b.value()) : nullptr;
}

TEST(DiskBackend, AFailedDirectoryFsyncStoresNothingAndARetryStores) {
  // Before: the put failed but left object and sidecar published and the
  // key out of the index, so a retry answered already_present while get()
  // answered not_found, until a restart.
  testing::TempDir dir;
  auto faults = std::make_shared<DiskFaults>();
  auto s = open_with(dir.path(), faults);
  const std::string key = make_key("dirsync");
  const Bytes data = make_bytes(3000, 3);
  faults->fail_dir_sync = true;
  auto put = s->put(key, data, k_meta);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, Errc::io_error);
  EXPECT_NE(put.error().message.find("fsync dir"), std::string::npos) << put.error().message;
  EXPECT_EQ(s->head(key).error().code, Errc::not_found);
  EXPECT_EQ(s->get(key).error().code, Errc::not_found);
  EXPECT_FALSE(fs::exists(object_path(dir.path(), key)));
  EXPECT_FALSE(fs::exists(object_path(dir.path(), key) + ".meta"));
  faults->fail_dir_sync = false;
  auto again = s->put(key, data, k_meta);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, PutOutcome::stored);
  EXPECT_EQ(s->get(key).value(), data);
}

TEST(DiskBackend, QuarantineSparesANewerCopyOfTheKey) {
  // A get() reads a rotten copy; before it checks the bytes, the key is
  // removed and stored again (a good copy). Before: the failed check then
  // quarantined whatever was under the key's name — the good, newer copy.
  testing::TempDir dir;
  auto faults = std::make_shared<DiskFaults>();
  auto s = open_with(dir.path(), faults);
  const std::string key = make_key("newer");
  const Bytes old_bytes = make_bytes(4000, 4), new_bytes = make_bytes(4000, 5);
  ASSERT_TRUE(s->put(key, old_bytes, k_meta).ok());
  flip_byte(object_path(dir.path(), key), 100);  // rot, before its first (checked) read
  faults->on_read = [&](const std::string& k) {
    ASSERT_TRUE(s->remove(k).ok());
    ASSERT_TRUE(s->put(k, new_bytes, k_meta).ok());
  };
  auto rotten = s->get(key);
  ASSERT_FALSE(rotten.ok());
  EXPECT_EQ(rotten.error().code, Errc::corrupt);
  auto fresh = s->get(key);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_EQ(*fresh, new_bytes);
  EXPECT_TRUE(fs::is_empty(dir.path() + "/quarantine"));
  // The rot itself is still caught: rot the new copy, and its own read
  // quarantines it.
  auto s2 = (s.reset(), open_at(dir.path()));
  flip_byte(object_path(dir.path(), key), 200);
  EXPECT_EQ(s2->get(key).error().code, Errc::corrupt);
  EXPECT_FALSE(fs::is_empty(dir.path() + "/quarantine"));
}
}  // namespace
}  // namespace kcache::storage
