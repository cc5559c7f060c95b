// Entry selection shared by every backend: list filters, sort order and
// cursors, and which entries an EvictPolicy picks.
//
// Backends gather a snapshot of their entries (under their own lock, or from
// Redis) and hand it here, so that list() and evict() mean exactly the same
// thing on memory, disk and redis.
//
// Cursor: "<sort value>/<key>" of the last entry of the page (for SortBy::key
// just "<key>"). The next page starts strictly after that position in the
// (sort value, key) order, so entries added or removed between pages neither
// repeat nor shift the rest. Cursors are opaque to callers.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "storage/backend.hpp"

namespace kcache::storage {

// Milliseconds since the Unix epoch (system clock).
std::int64_t now_ms();

// Errc::invalid_argument unless `key` is 64 lowercase hex characters.
Status check_key(const std::string& key);

bool matches(const Entry& e, const ListQuery& q);

// Filters, sorts and pages `all`. Errc::invalid_argument for a bad cursor.
Result<ListPage> make_page(std::vector<Entry> all, const ListQuery& q);

// The entries `policy` evicts out of `all`, given the backend's current
// total bytes. Filters (target, mode, label prefix, toolchain, older_than)
// combine with AND; with max_bytes, the least recently used matching entries
// are taken until the total is <= max_bytes; without it, every match.
// A policy with no filter and no max_bytes is Errc::invalid_argument (it
// would empty the cache by accident).
Result<EvictReport> select_for_eviction(std::vector<Entry> all, const EvictPolicy& policy,
                                        std::uint64_t total_bytes, std::int64_t now);

// Least recently used first (ties by key): the order LRU eviction walks.
void sort_lru(std::vector<Entry>& entries);

}  // namespace kcache::storage
