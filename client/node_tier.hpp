// NodeTier: the host-local bundle cache every process on a node shares.
//
// Layout (the node tier's one implementation; docs/client.md "The node tier"):
//   <root>/objects/<first 2 hex>/<64-hex key>   published bundles
//   <root>/objects/<2 hex>/.tmp-*               writes in progress
//   <root>/locks/<2 hex>/<key>.lock             per-key flock(2) files
// Contract:
//  - publish() writes a temp file in the object's directory, fsyncs it and
//    link(2)s it into place: readers never see a partial object, and the
//    first writer wins (a second publish of the key changes nothing).
//  - read() returns the bytes or nullopt; it does not verify (the client
//    does, and calls remove() on a corrupt object).
//  - trim() keeps the objects' total size at or under `max_bytes` (0 = no
//    limit) by deleting the least recently used (max of atime and mtime;
//    read() refreshes mtime at most once a minute) down to 90% of it; it also
//    removes temp files and unused lock files older than a day.
//  - Every failure (permissions, full disk) is a value: the node tier is an
//    optimisation and never fails a job.
// Thread safety: any number of threads and processes may use one root.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace kcache::client {

class NodeLock;

class NodeTier {
 public:
  NodeTier(std::string root, std::uint64_t max_bytes);

  const std::string& root() const { return root_; }
  std::string object_path(std::string_view key) const;

  std::optional<std::vector<std::uint8_t>> read(std::string_view key) const;
  // true: this call published it; false: it was already present.
  Result<bool> publish(std::string_view key, std::span<const std::uint8_t> bytes) const;
  void remove(std::string_view key) const;

  struct TrimReport {
    std::uint64_t bytes_before = 0;
    std::uint64_t bytes_after = 0;
    std::uint64_t removed = 0;
  };
  TrimReport trim() const;

  // The per-key lock, shared across processes (flock on a separate open
  // file, so threads of one process exclude each other too). Polls until
  // `deadline`; nullopt when it passed or the lock file cannot be made.
  std::optional<NodeLock> lock(std::string_view key,
                               std::chrono::steady_clock::time_point deadline) const;

 private:
  std::string root_;
  std::uint64_t max_bytes_;
};

// Holds a node lock; the kernel releases it when the process dies.
class NodeLock {
 public:
  explicit NodeLock(int fd) : fd_(fd) {}
  NodeLock(NodeLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  NodeLock& operator=(NodeLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  NodeLock(const NodeLock&) = delete;
  ~NodeLock();

 private:
  int fd_;
};

}  // namespace kcache::client
