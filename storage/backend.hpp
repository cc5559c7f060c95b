// Backend: where kcache-server keeps artifact bundles.
//
// Three implementations: memory (tests, hot tier), disk (the embedded
// default) and redis. One conformance suite (tests/cpp/storage_conformance_test.cpp)
// runs against all of them.
//
// Contract:
//  - Objects are immutable, named by their 64-hex cache key. put() is first
//    writer wins: a put of a present key returns PutOutcome::already_present
//    and changes nothing. Publication is atomic: a concurrent get() sees the
//    whole object or nothing.
//  - Metadata (EntryMeta) is supplied by the caller from the *verified*
//    manifest; the backend stores it beside the object and maintains size,
//    created, last access, hits and pinned itself.
//  - A pinned entry (set_pinned) is never evicted: not by evict() in any
//    mode, nor by the backend's own capacity eviction (a put that finds no
//    room but pinned entries is Errc::full). remove() still removes it.
//  - Expected failures are values: Errc::not_found, timeout, unavailable,
//    full, corrupt, io_error, invalid_argument (a malformed key). Nothing
//    throws; only open_backend() reports configuration errors, as values too.
//  - get() of an object that fails verification returns Errc::corrupt, and
//    the backend quarantines (disk) or removes (redis, memory) it; it is
//    never served again.
//  - Blocking: every call may block (disk I/O, network). Callers on I/O
//    threads must hop to a blocking pool first.
// Thread safety: every method may be called concurrently from any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace kcache::storage {

struct EntryMeta {
  std::string label;      // "GPT2Block/cpu:avx512/f32/default/train"
  std::string target;     // short target, e.g. "cpu:avx512" or "cuda:sm_90"
  std::string mode;       // "default", "max-autotune", "aoti", "resp" …
  std::string dtype;      // "f32", "bf16" …
  std::string toolchain;  // short toolchain id, e.g. "torch-2.13.0"
  std::uint64_t compile_ms = 0;
};

struct Entry {
  std::string key;  // 64 hex
  EntryMeta meta;
  std::uint64_t size = 0;
  std::int64_t created_ms = 0;      // unix epoch milliseconds
  std::int64_t last_access_ms = 0;  // updated by get()
  std::uint64_t hits = 0;           // successful get()s
  bool pinned = false;              // set_pinned(); persisted; never evicted
};

enum class PutOutcome { stored, already_present };

// value: entry_value() (storage/retention.hpp) at the time of the first
// page (later pages, through the cursor, use the same instant).
enum class SortBy { key, size, last_access, hits, created, value };

struct ListQuery {
  std::string label_prefix;  // empty: any
  std::string target;        // empty: any; otherwise exact match
  std::string mode;
  std::string toolchain;
  SortBy sort = SortBy::key;
  bool descending = false;
  std::size_t limit = 1000;
  std::string cursor;  // opaque; from ListPage::next_cursor
  // SortBy::value's half-life of hits (storage/retention.hpp); must be > 0.
  std::int64_t value_window_ms = 24LL * 3600 * 1000;  // a day: bench/retention/README.md
};

struct ListPage {
  std::vector<Entry> entries;
  std::string next_cursor;  // empty when there are no more
};

struct Usage {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t capacity_bytes = 0;  // 0: unlimited
};

// Which matching entries go first when a limit (max_bytes, max_entries)
// evicts: the least recently used, or the least valuable (entry_value(),
// storage/retention.hpp; ties: the least recently used first).
enum class EvictOrder { lru, value };

// What to evict. Filters combine with AND; pinned entries never match.
// max_bytes and max_entries then evict matching entries in `order` until
// the store's usage <= max_bytes and its entry count <= max_entries (both
// must hold when both are set); without either, every match is evicted.
struct EvictPolicy {
  std::optional<std::uint64_t> max_bytes;
  std::optional<std::uint64_t> max_entries;
  EvictOrder order = EvictOrder::lru;
  // EvictOrder::value's half-life of hits (storage/retention.hpp); must be > 0.
  std::int64_t value_window_ms = 24LL * 3600 * 1000;  // a day: bench/retention/README.md
  std::optional<std::int64_t> older_than_ms;  // last access older than now - this
  std::string target;
  std::string mode;
  std::string label_prefix;
  std::string toolchain;
  bool dry_run = false;
};

struct EvictReport {
  std::vector<std::string> keys;  // evicted (or, for dry_run, would be)
  std::uint64_t bytes = 0;
};

struct VerifyReport {
  std::uint64_t checked = 0;
  std::vector<std::string> corrupt;  // keys found corrupt
  std::uint64_t removed = 0;         // corrupt entries quarantined/removed
};

// Called for each object during verify(): returns false when bytes are bad.
// The server passes artifact::inspect_bundle plus the key check, so the
// storage layer does not depend on the bundle format.
using Verifier = std::function<bool(const std::string& key, const std::vector<std::uint8_t>& bytes)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Result<std::vector<std::uint8_t>> get(const std::string& key) = 0;
  virtual Result<Entry> head(const std::string& key) = 0;
  virtual Result<PutOutcome> put(const std::string& key, const std::vector<std::uint8_t>& bytes,
                                 const EntryMeta& meta) = 0;
  // put() of bytes held outside a vector (an upload spooled to a file and
  // mapped, server/http/upload_spool.hpp). Same contract as put(). The disk
  // backend writes them straight from `bytes`, Redis sends them from it a
  // batch of chunks at a time; memory keeps objects in memory, so this
  // default copies them into a vector first.
  virtual Result<PutOutcome> put_span(const std::string& key, std::span<const std::uint8_t> bytes,
                                      const EntryMeta& meta) {
    return put(key, std::vector<std::uint8_t>(bytes.begin(), bytes.end()), meta);
  }
  // A bounded read: bytes [offset, offset + length) of the object, fewer
  // where it ends first (empty when offset is at or past its end). For
  // callers that need a part of an object (entry inspection reads a
  // bundle's header and section table). Unlike get() it counts no hit,
  // leaves last access alone and cannot hash the object: it checks only
  // that the stored object has the size recorded for it; one that does
  // not (a truncated file, a missing Redis chunk) is Errc::corrupt, left
  // in place for get() or verify() to quarantine. Errc::not_found if
  // absent. The default reads the whole object through get(), so it is
  // correct but not bounded; disk, memory and redis override it.
  virtual Result<std::vector<std::uint8_t>> read_range(const std::string& key, std::uint64_t offset,
                                                       std::uint64_t length) {
    auto all = get(key);
    if (!all) return all.error();
    if (offset >= all->size()) return std::vector<std::uint8_t>{};
    auto end = offset + std::min<std::uint64_t>(length, all->size() - offset);
    return std::vector<std::uint8_t>(all->begin() + static_cast<std::ptrdiff_t>(offset),
                                     all->begin() + static_cast<std::ptrdiff_t>(end));
  }
  virtual Status remove(const std::string& key) = 0;  // not_found if absent
  virtual Result<ListPage> list(const ListQuery& query) = 0;
  virtual Result<Usage> usage() = 0;
  virtual Result<EvictReport> evict(const EvictPolicy& policy) = 0;
  // Pins (true) or unpins an entry: a pinned entry is never evicted (see the
  // contract above). Persisted with the entry (disk: its sidecar; redis: its
  // meta hash). Errc::not_found if absent, invalid_argument for a malformed key.
  virtual Status set_pinned(const std::string& key, bool pinned) = 0;
  // Scrubs every object; with remove=true corrupt ones are quarantined or removed.
  virtual Result<VerifyReport> verify(const Verifier& verifier, bool remove) = 0;
  // Cheap reachability check for /readyz.
  virtual Status ping() = 0;
  // "memory", "disk", "redis", "redis-cluster".
  virtual std::string name() const = 0;
  // What some backends do beyond this contract (a per-target breakdown,
  // a Cluster router's counters): storage/capabilities.hpp.
};

// Opens a backend from a URI: "memory:", "disk:PATH", "redis://[user:pass@]host:port/db".
// capacity_bytes (0 = unlimited) is the budget for put(): beyond it, the
// backend evicts unpinned LRU entries, or returns Errc::full when that is
// not enough.
Result<std::unique_ptr<Backend>> open_backend(const std::string& uri, std::uint64_t capacity_bytes);

// Errc::invalid_argument unless `ns` is a namespace name: 1 to 63
// characters of [a-z0-9_-], the first a letter or a digit.
Status check_namespace_name(const std::string& ns);

// The store of namespace `ns` beside the server's store `uri`:
//   "default"              exactly open_backend(uri, capacity_bytes)
//   memory:                a fresh memory backend of its own
//   disk:ROOT              a disk store at ROOT/namespaces/<ns> (created);
//                          the store at ROOT never looks inside namespaces/
//   redis://, redis-cluster://  the same Redis, keys prefixed
//                          "kcache:ns:<ns>:" (RedisOptions::key_prefix)
// Each namespace is a store of its own: entries, usage, index, listing,
// eviction and verify never cross. Errc::invalid_argument for a bad name or
// URI; otherwise what opening the store reported.
Result<std::unique_ptr<Backend>> open_namespace_backend(const std::string& uri, const std::string& ns,
                                                        std::uint64_t capacity_bytes);

}  // namespace kcache::storage
