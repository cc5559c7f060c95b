#include "server/http/upload_spool.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kcache::server {

namespace {

Error spool_error(const std::string& what, int err) {
  Errc code = Errc::io_error;
  if (err == ENOSPC || err == EDQUOT) code = Errc::full;
  if (err == ENOENT || err == ENOTDIR) code = Errc::not_found;
  return make_error(code, what + ": " + std::strerror(err));
}

}  // namespace

UploadSpool::Mapping::~Mapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

Result<std::unique_ptr<UploadSpool>> UploadSpool::create(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE here: a private name, unlinked before any byte is written.
    std::string path = dir + "/kcache-upload-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);  // mode 0600
    if (fd >= 0) ::unlink(path.c_str());
  }
  if (fd < 0) return spool_error("upload spool in " + dir, errno);
  return std::unique_ptr<UploadSpool>(new UploadSpool(fd));
}

UploadSpool::~UploadSpool() { ::close(fd_); }

Status UploadSpool::append(std::span<const std::uint8_t> bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(size_));
    if (n < 0) {
      if (errno == EINTR) continue;
      return spool_error("write to the upload spool", errno);
    }
    size_ += static_cast<std::uint64_t>(n);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return Ok{};
}

Result<UploadSpool::Mapping> UploadSpool::map() const {
  Mapping m;
  if (size_ == 0) return Result<Mapping>(std::move(m));
  void* p = ::mmap(nullptr, static_cast<std::size_t>(size_), PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return spool_error("map the upload spool", errno);
  ::madvise(p, static_cast<std::size_t>(size_), MADV_SEQUENTIAL);
  m.data_ = p;
  m.size_ = static_cast<std::size_t>(size_);
  return Result<Mapping>(std::move(m));
}

std::string default_spool_dir(const std::string& storage_uri) {
  if (storage_uri.rfind("disk:", 0) == 0) return storage_uri.substr(5) + "/tmp";
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

Status check_spool_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return spool_error("upload spool directory " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return make_error(Errc::invalid_argument, "upload spool directory " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return spool_error("upload spool directory " + dir + " is not writable", errno);
  auto probe = UploadSpool::create(dir);
  if (!probe) return probe.error();
  static const std::uint8_t byte = 0;
  if (auto s = (*probe)->append({&byte, 1}); !s) return s.error();
  return Ok{};
}

}  // namespace kcache::server
