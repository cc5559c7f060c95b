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
#include <optional>
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
// For backends without an in-memory index (redis); the others page their
// index in place (storage/index_page.hpp).
Result<ListPage> make_page(std::vector<Entry> all, const ListQuery& q);

// A position in a list order: (sort value, key).
struct ListPosition {
  std::int64_t value = 0;
  std::string key;
};

// The query's cursor, nullopt without one; Errc::invalid_argument if bad.
Result<std::optional<ListPosition>> parse_list_cursor(const ListQuery& q);

// True if a comes before b in the query's order.
bool list_before(const Entry& a, const Entry& b, const ListQuery& q);

// True if e comes strictly after the cursor position in the query's order.
bool after_cursor(const ListPosition& cursor, const Entry& e, const ListQuery& q);

// `sorted` (in the query's order, at most limit + 1 entries after the
// cursor) as a page: the first `limit`, and a cursor if there were more.
ListPage finish_page(std::vector<Entry> sorted, const ListQuery& q);

// Entries copied out of backends' indexes to answer list() since the
// process started: a deterministic measure of a page's cost (/metrics
// kcache_storage_list_entries_copied_total).
void note_entries_copied(std::uint64_t n);
std::uint64_t index_entries_copied();

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
