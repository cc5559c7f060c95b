// Startup of the disk backend: creates the layout, empties tmp/, and
// rebuilds the index by reading every sidecar under objects/. It reads
// nothing else under the root: namespaces/ (other stores, each opened and
// rebuilt on its own) is never looked into.
//
// Incomplete puts are repaired: an object without a sidecar, or a sidecar
// without its object, is deleted. A sidecar that does not parse, or whose
// size disagrees with its object, is moved to quarantine/ with its object.
// Thread safety: call before the backend is shared.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.hpp"
#include "storage/disk/layout.hpp"
#include "storage/disk/sidecar.hpp"

namespace kcache::storage::disk {

struct RebuildResult {
  std::vector<Sidecar> entries;
  std::uint64_t temp_files_removed = 0;
  std::uint64_t orphans_removed = 0;
  std::uint64_t quarantined = 0;
};

Result<RebuildResult> rebuild(const Layout& layout);

// Moves the object and its sidecar (if present) to quarantine/<hex>.<ms>.
void quarantine_files(const Layout& layout, const std::string& key);

}  // namespace kcache::storage::disk
