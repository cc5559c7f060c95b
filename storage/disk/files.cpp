#include "storage/disk/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/hex.hpp"

namespace kcache::storage::disk {

Error errno_error(const std::string& what, int err) {
  Errc code = Errc::io_error;
  if (err == ENOSPC || err == EDQUOT) code = Errc::full;
  if (err == ENOENT) code = Errc::not_found;
  return make_error(code, what + ": " + std::strerror(err));
}

Status write_file_synced(const std::string& path, std::span<const std::uint8_t> bytes, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("create " + path, errno);
  auto fail = [&](const std::string& what) -> Status {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return errno_error(what + " " + path, err);
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return errno_error("close " + path, err);
  }
  return Ok{};
}

Status fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("open dir " + path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return errno_error("fsync dir " + path, err);
  return Ok{};
}

Status sync_filesystem(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("open dir " + path, errno);
  int rc = ::syncfs(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return errno_error("syncfs " + path, err);
  return Ok{};
}

namespace {

// An open file and its size; closes the file when it goes.
struct OpenForRead {
  int fd = -1;
  std::uint64_t size = 0;
  OpenForRead() = default;
  OpenForRead(const OpenForRead&) = delete;
  OpenForRead& operator=(const OpenForRead&) = delete;
  ~OpenForRead() {
    if (fd >= 0) ::close(fd);
  }
};

Status open_for_read(const std::string& path, OpenForRead& f) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    const int err = errno;
    return errno_error("open " + path, err);
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    const int err = errno;
    return errno_error("stat " + path, err);
  }
  f.size = static_cast<std::uint64_t>(st.st_size);
  return Ok{};
}

// `want` bytes from `offset`. A file that ends first is an I/O error
// (a whole-file read) or corrupt (a range checked against its sidecar).
Result<std::vector<std::uint8_t>> pread_all(const OpenForRead& f, const std::string& path, std::uint64_t offset,
                                            std::uint64_t want, bool short_is_corrupt) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(want));
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(f.fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (n == 0 && short_is_corrupt) return make_error(Errc::corrupt, path + " ended while being read");
      return errno_error((short_is_corrupt ? "pread " : "read ") + path, err);
    }
    done += static_cast<std::size_t>(n);
  }
  return out;
}

}  // namespace

Result<std::vector<std::uint8_t>> read_file(const std::string& path) {
  OpenForRead f;
  if (auto st = open_for_read(path, f); !st) return st.error();
  return pread_all(f, path, 0, f.size, /*short_is_corrupt=*/false);
}

Result<std::vector<std::uint8_t>> read_file_range(const std::string& path, std::uint64_t offset,
                                                  std::uint64_t length, std::uint64_t expected_size) {
  OpenForRead f;
  if (auto st = open_for_read(path, f); !st) return st.error();
  if (f.size != expected_size) {
    return make_error(Errc::corrupt, path + " holds " + std::to_string(f.size) + " bytes, its sidecar says " +
                                         std::to_string(expected_size));
  }
  const std::uint64_t want = offset >= f.size ? 0 : std::min(length, f.size - offset);
  return pread_all(f, path, offset, want, /*short_is_corrupt=*/true);
}

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return errno_error("mkdir " + path, errno);
  return Ok{};
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  return names;
}

std::string random_token() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t v = rng();
  std::uint8_t b[8];
  std::memcpy(b, &v, sizeof b);
  return to_hex(b);
}

}  // namespace kcache::storage::disk
