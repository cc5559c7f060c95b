// UploadSpool (server/http/upload_spool.hpp) and the upload body that moves
// to it past its threshold (server/http/upload_body.hpp): the bytes come
// back identical through the mapping, the file is private and nameless, and
// closing it leaves nothing in the directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "server/config.hpp"
#include "server/http/upload_body.hpp"
#include "server/http/upload_spool.hpp"

namespace kcache::server {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;

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

TEST(UploadSpool, ConfiguredByFlags) {
  const char* plain[] = {"kcache-server"};
  auto d = parse_config(1, plain, nullptr);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->upload_spool_threshold, 1u << 20);
  EXPECT_EQ(d->upload_spool_dir, "");  // resolved at startup: default_spool_dir()
  const char* argv[] = {"kcache-server", "--upload-spool-threshold", "4M", "--upload-spool-dir", "/srv/spool"};
  auto c = parse_config(5, argv, nullptr);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->upload_spool_threshold, 4u << 20);
  EXPECT_EQ(c->upload_spool_dir, "/srv/spool");
}

// Feeds a whole PUT with a body of `body` through a Beast parser on UploadBody.
void parse_put(http::request_parser<UploadBody>& parser, const std::vector<std::uint8_t>& body,
               std::optional<std::uint64_t> spool_above, const std::string& dir, boost::beast::error_code& ec) {
  parser.body_limit(1ull << 30);
  parser.get().body().spool_above = spool_above;
  parser.get().body().spool_dir = dir;
  std::string head = "PUT /v1/artifacts/x HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  parser.put(boost::asio::buffer(head), ec);
  std::size_t at = 0;
  while (!ec && at < body.size()) {  // in pieces, as a socket delivers them
    const std::size_t n = std::min<std::size_t>(64 << 10, body.size() - at);
    at += parser.put(boost::asio::buffer(body.data() + at, n), ec);
  }
}

TEST(UploadBody, MovesToTheSpoolPastTheThreshold) {
  TempDir dir;
  auto body = random_bytes(1 << 20, 4);
  boost::beast::error_code ec;
  http::request_parser<UploadBody> parser;
  parse_put(parser, body, 100'000, dir.path.string(), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
  auto& got = parser.get().body();
  ASSERT_TRUE(got.spool);
  EXPECT_EQ(got.memory.capacity(), 0u) << "the bytes before the threshold stayed in memory";
  EXPECT_EQ(got.size(), body.size());
  auto m = got.spool->map();
  ASSERT_TRUE(m);
  EXPECT_TRUE(std::equal(body.begin(), body.end(), m->bytes().begin(), m->bytes().end()));
  EXPECT_TRUE(dir.empty());
}

TEST(UploadBody, StaysInMemoryUpToTheThresholdOrWithoutOne) {
  TempDir dir;
  auto body = random_bytes(100'000, 5);
  for (std::optional<std::uint64_t> above : {std::optional<std::uint64_t>(100'000), std::optional<std::uint64_t>()}) {
    boost::beast::error_code ec;
    http::request_parser<UploadBody> parser;
    parse_put(parser, body, above, dir.path.string(), ec);
    ASSERT_FALSE(ec) << ec.message();
    auto& got = parser.get().body();
    EXPECT_FALSE(got.spool);
    EXPECT_EQ(got.memory, body);
  }
  EXPECT_TRUE(open_files_in(dir.path).empty());
}

TEST(UploadBody, AnUnusableSpoolStopsTheReadWithItsError) {
  auto body = random_bytes(200'000, 6);
  boost::beast::error_code ec;
  http::request_parser<UploadBody> parser;
  parse_put(parser, body, 1000, "/nonexistent-kcache-spool", ec);
  EXPECT_TRUE(ec);
  auto& got = parser.get().body();
  ASSERT_TRUE(got.spool_error);
  EXPECT_EQ(got.spool_error->code, Errc::not_found);
  EXPECT_FALSE(got.spool);
}

}  // namespace
}  // namespace kcache::server
