#include "storage/entry_query.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <tuple>
#include <utility>

#include "keys/cache_key.hpp"
#include "storage/retention.hpp"

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

Error bad_cursor() { return make_error(Errc::invalid_argument, "bad list cursor"); }

bool parse_int(std::string_view text, std::int64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size() && !text.empty();
}

Result<ListPosition> parse_cursor(const std::string& cursor, SortBy by) {
  ListPosition p;
  std::string_view rest = cursor;
  if (by != SortBy::key) {
    auto slash = rest.find('/');
    if (slash == std::string_view::npos) return bad_cursor();
    auto num = rest.substr(0, slash);
    if (by == SortBy::value) {
      auto at = num.find('@');
      if (at == std::string_view::npos || !parse_int(num.substr(at + 1), p.at_ms)) return bad_cursor();
      num = num.substr(0, at);
    }
    if (!parse_int(num, p.value)) return bad_cursor();
    rest = rest.substr(slash + 1);
  }
  if (!keys::is_key_hex(rest)) return bad_cursor();
  p.key = std::string(rest);
  return p;
}

std::string make_cursor(const Entry& e, const ListOrder& o) {
  if (o.sort == SortBy::key) return e.key;
  std::string value = std::to_string(o.sort_value(e));
  if (o.sort == SortBy::value) value += "@" + std::to_string(o.at_ms);
  return value + "/" + e.key;
}

std::atomic<std::uint64_t> g_entries_copied{0};

}  // namespace

void note_entries_copied(std::uint64_t n) { g_entries_copied.fetch_add(n, std::memory_order_relaxed); }
std::uint64_t index_entries_copied() { return g_entries_copied.load(std::memory_order_relaxed); }

Result<std::optional<ListPosition>> parse_list_cursor(const ListQuery& q) {
  if (q.sort == SortBy::value && q.value_window_ms <= 0) {
    return make_error(Errc::invalid_argument, "value_window_ms must be positive");
  }
  if (q.cursor.empty()) return std::optional<ListPosition>{};
  auto c = parse_cursor(q.cursor, q.sort);
  if (!c) return c.error();
  return std::optional<ListPosition>(std::move(*c));
}

std::int64_t ListOrder::sort_value(const Entry& e) const {
  switch (sort) {
    case SortBy::key: return 0;
    case SortBy::size: return static_cast<std::int64_t>(e.size);
    case SortBy::last_access: return e.last_access_ms;
    case SortBy::hits: return static_cast<std::int64_t>(e.hits);
    case SortBy::created: return e.created_ms;
    case SortBy::value: return value_order_key(entry_value(e, at_ms, window_ms));
  }
  return 0;
}

ListOrder list_order(const ListQuery& q, const std::optional<ListPosition>& cursor) {
  ListOrder o;
  o.sort = q.sort;
  o.descending = q.descending;
  o.window_ms = q.value_window_ms;
  if (q.sort == SortBy::value) o.at_ms = cursor ? cursor->at_ms : now_ms();
  return o;
}

// (value, key) comparisons without copying keys.
bool list_before(std::int64_t av, const std::string& ak, std::int64_t bv, const std::string& bk,
                 const ListOrder& o) {
  return o.descending ? std::tie(bv, bk) < std::tie(av, ak) : std::tie(av, ak) < std::tie(bv, bk);
}

bool after_cursor(const ListPosition& cursor, const Entry& e, std::int64_t ev, const ListOrder& o) {
  return list_before(cursor.value, cursor.key, ev, e.key, o);
}

ListPage finish_page(std::vector<Entry> sorted, const ListQuery& q, const ListOrder& o) {
  ListPage page;
  std::size_t limit = q.limit == 0 ? 1 : q.limit;
  if (sorted.size() > limit) {
    sorted.resize(limit);
    page.next_cursor = make_cursor(sorted.back(), o);
  }
  page.entries = std::move(sorted);
  return page;
}

Result<ListPage> make_page(std::vector<Entry> all, const ListQuery& q) {
  note_entries_copied(all.size());
  auto after = parse_list_cursor(q);
  if (!after) return after.error();
  const ListOrder order = list_order(q, *after);
  // Each entry's sort value once (SortBy::value's is not free), then sorted
  // by (value, key) through indexes.
  std::vector<std::pair<std::int64_t, std::size_t>> kept;
  kept.reserve(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!matches(all[i], q)) continue;
    std::int64_t v = order.sort_value(all[i]);
    if (*after && !after_cursor(**after, all[i], v, order)) continue;
    kept.emplace_back(v, i);
  }
  std::sort(kept.begin(), kept.end(), [&](const auto& a, const auto& b) {
    return list_before(a.first, all[a.second].key, b.first, all[b.second].key, order);
  });
  const std::size_t want = (q.limit == 0 ? 1 : q.limit) + 1;
  std::vector<Entry> sorted;
  sorted.reserve(std::min(want, kept.size()));
  for (std::size_t i = 0; i < kept.size() && i < want; ++i) sorted.push_back(std::move(all[kept[i].second]));
  return finish_page(std::move(sorted), q, order);
}

void sort_lru(std::vector<Entry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.last_access_ms, a.key) < std::tie(b.last_access_ms, b.key);
  });
}

namespace {

// Least valuable first; ties: least recently used, then key.
void sort_by_value(std::vector<Entry>& entries, std::int64_t now, std::int64_t window_ms) {
  std::vector<std::pair<std::int64_t, std::size_t>> order;
  order.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    order.emplace_back(value_order_key(entry_value(entries[i], now, window_ms)), i);
  }
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const Entry &ea = entries[a.second], &eb = entries[b.second];
    return std::tie(a.first, ea.last_access_ms, ea.key) < std::tie(b.first, eb.last_access_ms, eb.key);
  });
  std::vector<Entry> sorted;
  sorted.reserve(entries.size());
  for (const auto& [v, i] : order) sorted.push_back(std::move(entries[i]));
  entries = std::move(sorted);
}

}  // namespace

Result<EvictReport> select_for_eviction(std::vector<Entry> all, const EvictPolicy& p,
                                        std::uint64_t total_bytes, std::uint64_t total_entries,
                                        std::int64_t now) {
  bool has_filter = p.older_than_ms || !p.target.empty() || !p.mode.empty() ||
                    !p.label_prefix.empty() || !p.toolchain.empty();
  const bool limited = p.max_bytes || p.max_entries;
  if (!has_filter && !limited) {
    return make_error(Errc::invalid_argument,
                      "evict policy selects nothing: give a filter, max_bytes or max_entries");
  }
  if (p.order == EvictOrder::value && p.value_window_ms <= 0) {
    return make_error(Errc::invalid_argument, "value_window_ms must be positive");
  }
  ListQuery filter;
  filter.label_prefix = p.label_prefix;
  filter.target = p.target;
  filter.mode = p.mode;
  filter.toolchain = p.toolchain;
  std::erase_if(all, [&](const Entry& e) {
    if (e.pinned || !matches(e, filter)) return true;
    return p.older_than_ms && e.last_access_ms >= now - *p.older_than_ms;
  });
  if (p.order == EvictOrder::value) {
    sort_by_value(all, now, p.value_window_ms);
  } else {
    sort_lru(all);
  }
  auto within = [&] {
    return (!p.max_bytes || total_bytes <= *p.max_bytes) && (!p.max_entries || total_entries <= *p.max_entries);
  };
  EvictReport report;
  for (const Entry& e : all) {
    if (limited && within()) break;
    report.keys.push_back(e.key);
    report.bytes += e.size;
    total_bytes -= std::min(total_bytes, e.size);
    total_entries -= std::min<std::uint64_t>(total_entries, 1);
  }
  return report;
}

}  // namespace kcache::storage
