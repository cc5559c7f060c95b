// MemoryBackend: objects in process memory, for tests and as a hot tier.
//
// Contract: the Backend contract (storage/backend.hpp). Nothing persists.
// With a capacity, put() evicts least recently used unpinned entries
// synchronously until the new object fits; an object larger than the
// capacity, or one that does not fit beside the pinned entries, is
// Errc::full. Objects live in shared immutable buffers, so eviction never
// disturbs a get() in progress. No checksum is kept (memory does not rot
// the way disks do); verify() runs the caller's Verifier and removes what
// it rejects.
// Thread safety: one mutex; gets copy the bytes outside it.
#pragma once

#include <cstdint>
#include <memory>

#include "storage/backend.hpp"

namespace kcache::storage {

std::unique_ptr<Backend> make_memory_backend(std::uint64_t capacity_bytes);

}  // namespace kcache::storage
