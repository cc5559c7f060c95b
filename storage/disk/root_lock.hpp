#pragma once

// One process per disk store: the directory is made if missing, its LOCK
// file held with an exclusive flock for as long as the store is open (a
// second kcache-server on the same directory is refused, not interleaved),
// and the index rebuilt from the sidecars under that lock.

#include <vector>

#include "common/result.hpp"
#include "storage/disk/layout.hpp"
#include "storage/disk/sidecar.hpp"

namespace kcache::storage::disk {

struct LockedRoot {
  int lock_fd = -1;              // closing it releases the flock
  std::vector<Sidecar> entries;  // what rebuild() found
};

// Errc::unavailable when another process holds the directory.
Result<LockedRoot> lock_root(const Layout& layout);

}  // namespace kcache::storage::disk
