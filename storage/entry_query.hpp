// Entry selection shared by every backend: list filters, sort order and
// cursors, and which entries an EvictPolicy picks.
//
// Backends gather a snapshot of their entries (under their own lock, or from
// Redis) and hand it here, so that list() and evict() mean exactly the same
// thing on memory, disk and redis.
//
// Cursor: "<sort value>/<key>" of the last entry of the page (for SortBy::key
// just "<key>"; for SortBy::value "<value>@<at_ms>/<key>", where <value> is
// value_order_key() of entry_value() and <at_ms> the instant the first page
// computed values at: every later page computes them at that instant too,
// so values that decay between pages neither repeat nor skip entries). The
// next page starts strictly after that position in the (sort value, key)
// order, so entries added or removed between pages neither repeat nor shift
// the rest. Cursors are opaque to callers.
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

// A position in a list order: (sort value, key); for SortBy::value also
// the instant its values are computed at.
struct ListPosition {
  std::int64_t value = 0;
  std::string key;
  std::int64_t at_ms = 0;
};

// The query's cursor, nullopt without one; Errc::invalid_argument if bad
// (or, for SortBy::value, if value_window_ms is not positive).
Result<std::optional<ListPosition>> parse_list_cursor(const ListQuery& q);

// A query's order: (sort value, key), ascending or descending; SortBy::value
// computes values at `at_ms` (the cursor's, or now for a first page).
struct ListOrder {
  SortBy sort = SortBy::key;
  bool descending = false;
  std::int64_t at_ms = 0;
  std::int64_t window_ms = 1;

  // The entry's sort value in this order (SortBy::key has none: 0).
  std::int64_t sort_value(const Entry& e) const;
};

ListOrder list_order(const ListQuery& q, const std::optional<ListPosition>& cursor);

// True if (av, ak) comes before (bv, bk) in the order.
bool list_before(std::int64_t av, const std::string& ak, std::int64_t bv, const std::string& bk,
                 const ListOrder& o);

// True if e, of sort value ev, comes strictly after the cursor position.
bool after_cursor(const ListPosition& cursor, const Entry& e, std::int64_t ev, const ListOrder& o);

// `sorted` (in the order, at most limit + 1 entries after the cursor) as a
// page: the first `limit`, and a cursor if there were more.
ListPage finish_page(std::vector<Entry> sorted, const ListQuery& q, const ListOrder& o);

// Entries copied out of backends' indexes to answer list() since the
// process started: a deterministic measure of a page's cost (/metrics
// kcache_storage_list_entries_copied_total).
void note_entries_copied(std::uint64_t n);
std::uint64_t index_entries_copied();

// The entries `policy` evicts out of `all`, given the backend's current
// total bytes and entry count. Pinned entries are never taken. Filters
// (target, mode, label prefix, toolchain, older_than) combine with AND; with
// max_bytes and/or max_entries, matching entries are taken in the policy's
// order (least recently used first, or least entry_value() at `now` first,
// ties least recently used first) until the total is <= max_bytes and the
// count <= max_entries; without either, every match.
// A policy with no filter and no limit is Errc::invalid_argument (it would
// empty the cache by accident), and so is EvictOrder::value with a
// value_window_ms that is not positive.
Result<EvictReport> select_for_eviction(std::vector<Entry> all, const EvictPolicy& policy,
                                        std::uint64_t total_bytes, std::uint64_t total_entries,
                                        std::int64_t now);

// Least recently used first (ties by key): the order LRU eviction walks.
void sort_lru(std::vector<Entry>& entries);

}  // namespace kcache::storage
