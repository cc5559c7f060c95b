// Retention by value: what an entry is worth keeping, one formula for every
// backend (storage/entry_query.hpp sorts and evicts by it), so that memory,
// disk and redis mean the same thing by SortBy::value and EvictOrder::value.
//
//   value = compile_seconds × (1 + hits) × 2^(−age / window) / max(size, 1)
//
//   compile_seconds = meta.compile_ms / 1000
//   age             = max(0, now_ms − last_access_ms)
//   window          = window_ms (> 0; a value ≤ 0 is taken as 1 ms)
//
// The compile seconds one byte of the entry has saved and will save: its
// uses (the 1 is the upload's own, so a new entry is worth its compile
// cost), the whole halved for every `window` since its last access, so an
// entry nobody reads loses its worth however many hits it once had, and a
// fresh one is not the first to go just because it is new (the first
// formula, which decayed only the hits, did exactly that and saved less
// compile time than LRU: bench/retention/README.md). Always finite and ≥ 0.
//
// Order key: list cursors hold a sort value as an int64 (ListPosition), so
// value_order_key() maps a value to one: the bit pattern of the
// non-negative IEEE-754 double, which orders exactly as the doubles do (no
// rounding: two different values never tie). NaN and negatives map to 0.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "storage/backend.hpp"

namespace kcache::storage {

double entry_value(const Entry& e, std::int64_t now_ms, std::int64_t window_ms);

// Order-preserving: a < b  ⇔  value_order_key(a) < value_order_key(b) for
// values ≥ 0 (+∞ included).
std::int64_t value_order_key(double value);

}  // namespace kcache::storage
