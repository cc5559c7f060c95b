// How the disk backend's files change on disk: an object published with
// its sidecar, a sidecar replaced, a batch of sidecars written back. The
// in-memory index, the busy keys and eviction stay in DiskBackend
// (storage/disk/backend.cpp); these functions only touch files, and the
// caller holds the keys they touch busy.
// Thread safety: stateless; concurrent calls must be for different keys.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "storage/backend.hpp"
#include "storage/disk/layout.hpp"
#include "storage/disk/sidecar.hpp"
#include "storage/fault_hook.hpp"

namespace kcache::storage::disk {

// put()'s files: tmp/<key>.<token>.obj and .meta written and fsynced,
// [hook->before_publish], link() of the object into objects/ab/ (never
// overwrites: already_present if the key is there), rename() of the
// sidecar into place (the commit), fsync of objects/ab/. On any failure
// nothing of it is left behind: after a failed directory fsync the entry
// is taken back out (not known to be durable, so not stored).
Result<PutOutcome> publish(const Layout& layout, const Sidecar& sc, std::span<const std::uint8_t> bytes,
                           PutFaultHook* hook);

// Replaces a published entry's sidecar with `sc`, durably (tmp/, fsync,
// rename, fsync of the directory); `replaced` tells whether the rename
// happened (an error after it is the directory's fsync).
Status replace_sidecar(const Layout& layout, const Sidecar& sc, bool& replaced);

// Writes each sidecar back (the advisory stats: last access, hits). Each
// new sidecar is written to tmp/, then all of them reach the disk (one
// syncfs), then each replaces its old one by rename: after a power loss a
// sidecar is the old one or the new one, never an empty or partial file
// (which would lose its entry at the next start). Returns, per sidecar,
// whether it replaced the old one.
std::vector<bool> write_back(const Layout& layout, const std::vector<Sidecar>& sidecars);

}  // namespace kcache::storage::disk
