// UploadSpool (server/http/upload_spool.hpp): the bytes come back identical
// through the mapping, the file is private and nameless, and closing it
// leaves nothing in the directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/http/upload_spool.hpp"

namespace kcache::server {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kcache-spool-test-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  bool empty() const { return fs::is_empty(path); }
};

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

// This process's descriptors on files in `dir` (O_TMPFILE files read as
// "DIR/#INODE (deleted)").
std::vector<std::string> open_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = fs::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind(dir.string() + "/", 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

TEST(UploadSpool, BytesComeBackIdenticalThroughTheMapping) {
  TempDir dir;
  auto spool = UploadSpool::create(dir.path.string());
  ASSERT_TRUE(spool) << spool.error().message;
  auto a = random_bytes(3 << 20, 1);
  auto b = random_bytes(12345, 2);
  ASSERT_TRUE((*spool)->append(a));
  ASSERT_TRUE((*spool)->append(b));
  ASSERT_TRUE((*spool)->append({}));
  EXPECT_EQ((*spool)->size(), a.size() + b.size());
  auto m = (*spool)->map();
  ASSERT_TRUE(m) << m.error().message;
  auto got = m->bytes();
  ASSERT_EQ(got.size(), a.size() + b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), got.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), got.begin() + static_cast<std::ptrdiff_t>(a.size())));
}

TEST(UploadSpool, IsPrivateNamelessAndGoneWhenClosed) {
  TempDir dir;
  {
    auto spool = UploadSpool::create(dir.path.string());
    ASSERT_TRUE(spool);
    ASSERT_TRUE((*spool)->append(random_bytes(1000, 3)));
    EXPECT_TRUE(dir.empty()) << "the spool file has a name";
    auto fds = open_files_in(dir.path);
    ASSERT_EQ(fds.size(), 1u);
    struct stat st {};
    ASSERT_EQ(::stat(fds[0].c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(st.st_nlink, 0u);
  }
  EXPECT_TRUE(open_files_in(dir.path).empty());
  EXPECT_TRUE(dir.empty());
}

TEST(UploadSpool, AnEmptySpoolMapsToNoBytes) {
  TempDir dir;
  auto spool = UploadSpool::create(dir.path.string());
  ASSERT_TRUE(spool);
  auto m = (*spool)->map();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->bytes().empty());
}

TEST(UploadSpool, AMissingDirectoryIsAnErrorNamingIt) {
  auto spool = UploadSpool::create("/nonexistent-kcache-spool");
  ASSERT_FALSE(spool);
  EXPECT_EQ(spool.error().code, Errc::not_found);
  EXPECT_NE(spool.error().message.find("/nonexistent-kcache-spool"), std::string::npos);
}

TEST(UploadSpool, StartupCheckRefusesWhatCannotHoldASpool) {
  TempDir dir;
  EXPECT_TRUE(check_spool_dir(dir.path.string()));
  EXPECT_TRUE(dir.empty()) << "the probe left a file";
  EXPECT_FALSE(check_spool_dir((dir.path / "missing").string()));
  std::string file = (dir.path / "file").string();
  {
    auto f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  auto not_dir = check_spool_dir(file);
  ASSERT_FALSE(not_dir);
  EXPECT_NE(not_dir.error().message.find("not a directory"), std::string::npos);
  if (::geteuid() != 0) {
    fs::path ro = dir.path / "ro";
    fs::create_directory(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    auto refused = check_spool_dir(ro.string());
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("not writable"), std::string::npos);
    fs::permissions(ro, fs::perms::owner_all);
  }
}

TEST(UploadSpool, DefaultsToTheDiskStoragesTmp) {
  EXPECT_EQ(default_spool_dir("disk:/var/lib/kcache"), "/var/lib/kcache/tmp");
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string expected = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  EXPECT_EQ(default_spool_dir("memory:"), expected);
  EXPECT_EQ(default_spool_dir("redis://127.0.0.1:6379/0"), expected);
}

}  // namespace
}  // namespace kcache::server
