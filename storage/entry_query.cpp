#include "storage/entry_query.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <tuple>

#include "keys/cache_key.hpp"

namespace kcache::storage {

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status check_key(const std::string& key) {
  if (!keys::is_key_hex(key)) {
    return make_error(Errc::invalid_argument, "storage key must be 64 lowercase hex characters");
  }
  return Ok{};
}

bool matches(const Entry& e, const ListQuery& q) {
  if (!q.label_prefix.empty() && e.meta.label.rfind(q.label_prefix, 0) != 0) return false;
  if (!q.target.empty() && e.meta.target != q.target) return false;
  if (!q.mode.empty() && e.meta.mode != q.mode) return false;
  if (!q.toolchain.empty() && e.meta.toolchain != q.toolchain) return false;
  return true;
}

namespace {

// The numeric sort value of an entry; SortBy::key has none (0).
std::int64_t sort_value(const Entry& e, SortBy by) {
  switch (by) {
    case SortBy::key: return 0;
    case SortBy::size: return static_cast<std::int64_t>(e.size);
    case SortBy::last_access: return e.last_access_ms;
    case SortBy::hits: return static_cast<std::int64_t>(e.hits);
    case SortBy::created: return e.created_ms;
  }
  return 0;
}

struct Position {
  std::int64_t value = 0;
  std::string key;
};

Result<Position> parse_cursor(const std::string& cursor, SortBy by) {
  Position p;
  std::string_view rest = cursor;
  if (by != SortBy::key) {
    auto slash = rest.find('/');
    if (slash == std::string_view::npos) return make_error(Errc::invalid_argument, "bad list cursor");
    auto num = rest.substr(0, slash);
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), p.value);
    if (ec != std::errc{} || ptr != num.data() + num.size()) {
      return make_error(Errc::invalid_argument, "bad list cursor");
    }
    rest = rest.substr(slash + 1);
  }
  if (!keys::is_key_hex(rest)) return make_error(Errc::invalid_argument, "bad list cursor");
  p.key = std::string(rest);
  return p;
}

std::string make_cursor(const Entry& e, SortBy by) {
  if (by == SortBy::key) return e.key;
  return std::to_string(sort_value(e, by)) + "/" + e.key;
}

std::atomic<std::uint64_t> g_entries_copied{0};

}  // namespace

void note_entries_copied(std::uint64_t n) { g_entries_copied.fetch_add(n, std::memory_order_relaxed); }
std::uint64_t index_entries_copied() { return g_entries_copied.load(std::memory_order_relaxed); }

Result<std::optional<ListPosition>> parse_list_cursor(const ListQuery& q) {
  if (q.cursor.empty()) return std::optional<ListPosition>{};
  auto c = parse_cursor(q.cursor, q.sort);
  if (!c) return c.error();
  return std::optional<ListPosition>(ListPosition{c->value, std::move(c->key)});
}

// (value, key) comparisons without copying keys.
bool before_at(std::int64_t av, const std::string& ak, std::int64_t bv, const std::string& bk, bool descending) {
  return descending ? std::tie(bv, bk) < std::tie(av, ak) : std::tie(av, ak) < std::tie(bv, bk);
}

bool list_before(const Entry& a, const Entry& b, const ListQuery& q) {
  return before_at(sort_value(a, q.sort), a.key, sort_value(b, q.sort), b.key, q.descending);
}

bool after_cursor(const ListPosition& cursor, const Entry& e, const ListQuery& q) {
  return before_at(cursor.value, cursor.key, sort_value(e, q.sort), e.key, q.descending);
}

ListPage finish_page(std::vector<Entry> sorted, const ListQuery& q) {
  ListPage page;
  std::size_t limit = q.limit == 0 ? 1 : q.limit;
  if (sorted.size() > limit) {
    sorted.resize(limit);
    page.next_cursor = make_cursor(sorted.back(), q.sort);
  }
  page.entries = std::move(sorted);
  return page;
}

Result<ListPage> make_page(std::vector<Entry> all, const ListQuery& q) {
  note_entries_copied(all.size());
  auto after = parse_list_cursor(q);
  if (!after) return after.error();
  std::erase_if(all, [&](const Entry& e) { return !matches(e, q) || (*after && !after_cursor(**after, e, q)); });
  std::sort(all.begin(), all.end(), [&](const Entry& a, const Entry& b) { return list_before(a, b, q); });
  return finish_page(std::move(all), q);
}

void sort_lru(std::vector<Entry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.last_access_ms, a.key) < std::tie(b.last_access_ms, b.key);
  });
}

Result<EvictReport> select_for_eviction(std::vector<Entry> all, const EvictPolicy& p,
                                        std::uint64_t total_bytes, std::int64_t now) {
  bool has_filter = p.older_than_ms || !p.target.empty() || !p.mode.empty() ||
                    !p.label_prefix.empty() || !p.toolchain.empty();
  if (!has_filter && !p.max_bytes) {
    return make_error(Errc::invalid_argument, "evict policy selects nothing: give a filter or max_bytes");
  }
  ListQuery filter;
  filter.label_prefix = p.label_prefix;
  filter.target = p.target;
  filter.mode = p.mode;
  filter.toolchain = p.toolchain;
  std::erase_if(all, [&](const Entry& e) {
    if (!matches(e, filter)) return true;
    return p.older_than_ms && e.last_access_ms >= now - *p.older_than_ms;
  });
  sort_lru(all);
  EvictReport report;
  for (const Entry& e : all) {
    if (p.max_bytes && total_bytes <= *p.max_bytes) break;
    report.keys.push_back(e.key);
    report.bytes += e.size;
    total_bytes -= std::min(total_bytes, e.size);
  }
  return report;
}

}  // namespace kcache::storage
