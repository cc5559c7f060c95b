// DiskBackend: the embedded default store, one directory on local disk.
//
// Layout under `root` (docs/operations.md "## Storage"):
//   LOCK                       flock()ed by the owning process (one per root)
//   objects/ab/<hex>           the object bytes (ab = first two hex digits)
//   objects/ab/<hex>.meta      its sidecar (storage/disk/sidecar.hpp): the commit record
//   tmp/                       temp files of puts in progress; emptied at open
//   quarantine/<hex>.<ms>[.meta]  objects that failed verification
//   namespaces/<ns>/           the stores of other namespaces, each a root of
//                              this layout (open_namespace_backend): this
//                              store never reads, counts, cleans or
//                              quarantines anything under it
//
// put(): write tmp/<hex>.<token>.obj and .meta, fsync both, [fault hook],
// link() the object into objects/ab/ (fails if present: never overwrites),
// rename() the sidecar into place (the commit), fsync objects/ab/. A crash
// at any point leaves either no sidecar (the object, if linked, is deleted
// at the next open) or a complete entry.
// get(): the first read after a put or a restart checks the SHA-256 from the
// sidecar; a mismatch moves the object to quarantine/ and returns
// Errc::corrupt. Later reads are not hashed (clients verify every bundle).
// Eviction: with a capacity, a background thread evicts LRU entries once
// usage passes high_watermark * capacity, down to low_watermark * capacity;
// a put that would overflow the capacity evicts synchronously first (and is
// Errc::full if that cannot make room). Entries being read and pinned
// entries are never chosen, and a read that already opened its file
// finishes even if the file is unlinked (POSIX keeps the inode alive until
// the last descriptor closes).
// Last access and hit counts live in memory and are written back to the
// sidecars every stats_flush_interval and at close (advisory, not fsynced).
// A pin (set_pinned) is written to the sidecar at once, durably.
// Thread safety: every method may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.hpp"
#include "storage/backend.hpp"
#include "storage/fault_hook.hpp"

namespace kcache::storage {

struct DiskOptions {
  std::string root;
  std::uint64_t capacity_bytes = 0;  // 0: unlimited
  // Background eviction starts above high * capacity and stops at low * capacity:
  // the gap keeps the evictor from waking on every put.
  double high_watermark = 0.90;
  double low_watermark = 0.80;
  std::chrono::milliseconds stats_flush_interval{30'000};
  std::shared_ptr<PutFaultHook> fault_hook;  // tests only
};

// Opens (creating if needed) the store and rebuilds its index from disk.
// Errc::unavailable if another process holds the root's LOCK.
Result<std::unique_ptr<Backend>> open_disk_backend(const DiskOptions& options);

}  // namespace kcache::storage
