// UploadSpool: an upload body kept in a private, nameless temporary file
// while it arrives, so the server's memory does not grow with it
// (docs/protocol.md "Limits and deadlines", docs/security.md).
//
// The file is opened with O_TMPFILE (mode 0600) in the spool directory: it
// has no name, so nothing else can open it, and the kernel frees it when the
// descriptor closes — a truncated, refused or aborted upload leaves nothing
// behind, even after kill -9. Where the filesystem lacks O_TMPFILE, mkstemp()
// and an immediate unlink() do the same (the name exists for microseconds).
// map() gives a read-only view of every byte written, for the bundle check
// and the store: the pages are page cache (reclaimable, shared with the file
// system), not the process's anonymous memory, and go with the Mapping.
// Thread safety: one owner at a time (the session while the body arrives,
// then the blocking pool for the check and store).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/result.hpp"

namespace kcache::server {

class UploadSpool {
 public:
  // A read-only view of the spooled bytes; unmapped on destruction.
  class Mapping {
   public:
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    Mapping(Mapping&& o) noexcept : data_(o.data_), size_(o.size_) {
      o.data_ = nullptr;
      o.size_ = 0;
    }
    ~Mapping();
    std::span<const std::uint8_t> bytes() const { return {static_cast<const std::uint8_t*>(data_), size_}; }

   private:
    friend class UploadSpool;
    void* data_ = nullptr;
    std::size_t size_ = 0;
  };

  // Opens a nameless file in `dir`. Errc::full when the file system is full,
  // else io_error / not_found, with the directory in the message.
  static Result<std::unique_ptr<UploadSpool>> create(const std::string& dir);

  UploadSpool(const UploadSpool&) = delete;
  UploadSpool& operator=(const UploadSpool&) = delete;
  ~UploadSpool();

  // Appends every byte (retrying short writes). On failure the spool is
  // unusable and the upload must be refused.
  Status append(std::span<const std::uint8_t> bytes);
  std::uint64_t size() const { return size_; }
  Result<Mapping> map() const;

 private:
  explicit UploadSpool(int fd) : fd_(fd) {}
  int fd_;
  std::uint64_t size_ = 0;
};

// The spool directory when --upload-spool-dir is not given: the disk
// storage's own tmp/ for "disk:PATH" (same file system as the objects),
// else $TMPDIR, else /tmp.
std::string default_spool_dir(const std::string& storage_uri);

// Startup check: `dir` exists, is a directory, and a spool file can be
// created in it. The error says which and why.
Status check_spool_dir(const std::string& dir);

}  // namespace kcache::server
