#include "client/node_tier.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>

namespace kcache::client {

namespace fs = std::filesystem;

namespace {

constexpr auto k_stale_temp = std::chrono::hours(24);
constexpr std::int64_t k_touch_interval_s = 60;

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

std::string random_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())};
  static const char k_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 12; ++i) s.push_back(k_chars[rng() % 36]);
  return s;
}

std::int64_t last_use(const struct stat& st) {
  return std::max(st.st_atim.tv_sec, st.st_mtim.tv_sec);
}

}  // namespace

NodeLock::~NodeLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

NodeTier::NodeTier(std::string root, std::uint64_t max_bytes)
    : root_(std::move(root)), max_bytes_(max_bytes) {}

std::string NodeTier::object_path(std::string_view key) const {
  return root_ + "/objects/" + std::string(key.substr(0, 2)) + "/" + std::string(key);
}

std::optional<std::vector<std::uint8_t>> NodeTier::read(std::string_view key) const {
  std::string path = object_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st{};
  std::vector<std::uint8_t> out;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok) {
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < out.size()) {
      ssize_t r = ::read(fd, out.data() + got, out.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    ok = got == out.size();
    // LRU bookkeeping without relying on atime (often relatime/noatime).
    if (ok && ::time(nullptr) - st.st_mtim.tv_sec > k_touch_interval_s) ::futimens(fd, nullptr);
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  return out;
}

Result<bool> NodeTier::publish(std::string_view key, std::span<const std::uint8_t> bytes) const {
  std::string dest = object_path(key);
  std::string dir = dest.substr(0, dest.rfind('/'));
  if (::access(dest.c_str(), F_OK) == 0) return false;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(Errc::io_error, "cannot create " + dir + ": " + ec.message());
  std::string tmp = dir + "/.tmp-" + random_suffix();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(Errc::io_error, errno_text("cannot create " + tmp));
  bool ok = write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    errno = saved;
    return make_error(Errc::io_error, errno_text("cannot write " + tmp));
  }
  // link() fails with EEXIST when another writer won: first writer wins.
  bool published = ::link(tmp.c_str(), dest.c_str()) == 0;
  saved = errno;
  ::unlink(tmp.c_str());
  if (!published && saved != EEXIST) {
    errno = saved;
    return make_error(Errc::io_error, errno_text("cannot publish " + dest));
  }
  if (published) {
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    trim();
  }
  return published;
}

void NodeTier::remove(std::string_view key) const {
  ::unlink(object_path(key).c_str());
}

NodeTier::TrimReport NodeTier::trim() const {
  TrimReport report;
  struct Entry {
    std::string path;
    std::int64_t used;
    std::uint64_t size;
  };
  std::vector<Entry> entries;
  std::int64_t now = ::time(nullptr);
  auto stale = std::chrono::duration_cast<std::chrono::seconds>(k_stale_temp).count();
  std::error_code ec;
  for (fs::directory_iterator shard(root_ + "/objects", ec), end; !ec && shard != end;
       shard.increment(ec)) {
    std::error_code ec2;
    for (fs::directory_iterator it(shard->path(), ec2); !ec2 && it != end; it.increment(ec2)) {
      std::string path = it->path().string();
      struct stat st{};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (it->path().filename().string().rfind(".tmp-", 0) == 0) {
        if (now - st.st_mtim.tv_sec > stale) ::unlink(path.c_str());
        continue;
      }
      entries.push_back({path, last_use(st), static_cast<std::uint64_t>(st.st_size)});
      report.bytes_before += static_cast<std::uint64_t>(st.st_size);
    }
  }
  report.bytes_after = report.bytes_before;
  if (max_bytes_ > 0 && report.bytes_before > max_bytes_) {
    std::uint64_t target = max_bytes_ / 10 * 9;
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.used < b.used; });
    for (const auto& e : entries) {
      if (report.bytes_after <= target) break;
      if (::unlink(e.path.c_str()) == 0) {
        report.bytes_after -= e.size;
        ++report.removed;
      }
    }
  }
  // Lock files of keys not touched for a day. A process that opened one just
  // before the unlink may lock an orphan: at worst one extra compile.
  for (fs::directory_iterator shard(root_ + "/locks", ec), end; !ec && shard != end;
       shard.increment(ec)) {
    std::error_code ec2;
    for (fs::directory_iterator it(shard->path(), ec2); !ec2 && it != end; it.increment(ec2)) {
      struct stat st{};
      std::string path = it->path().string();
      if (::lstat(path.c_str(), &st) == 0 && now - st.st_mtim.tv_sec > stale)
        ::unlink(path.c_str());
    }
  }
  return report;
}

std::optional<NodeLock> NodeTier::lock(std::string_view key,
                                       std::chrono::steady_clock::time_point deadline) const {
  std::string dir = root_ + "/locks/" + std::string(key.substr(0, 2));
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string path = dir + "/" + std::string(key) + ".lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return std::nullopt;
  NodeLock held(fd);
  auto sleep = std::chrono::milliseconds(2);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::futimens(fd, nullptr);  // keeps trim() off a lock in use
      return std::optional<NodeLock>(std::move(held));
    }
    if (errno != EWOULDBLOCK && errno != EINTR) return std::nullopt;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(sleep, deadline - now));
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace kcache::client
