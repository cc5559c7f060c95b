// list() pages straight from a backend's in-memory index (memory, disk),
// without copying the index: only the entries that end up on the page are
// copied, limit + 1 at most.
//
//  - SortBy::key: the index is a std::map ordered by key, so a page starts
//    at the cursor (upper_bound / lower_bound) and stops after limit + 1
//    matches: O(limit + skipped non-matching entries) per page.
//  - other orders: one pass over the index keeping the limit + 1 first
//    entries after the cursor in a bounded heap of (sort value, pointer):
//    each entry's sort value computed once (SortBy::value's is not free),
//    O(n log limit) comparisons per page, limit + 1 copies. The order is
//    (value, key) as in entry_query.hpp, so cursors mean the same as make_page's.
// Counted in storage::index_entries_copied() (entry_query.hpp).
// Thread safety: the caller holds its index's lock for the call.
#pragma once

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "storage/entry_query.hpp"

namespace kcache::storage {

// `entry_of(value)` gives the Entry of an index value.
template <typename Map, typename EntryOf>
Result<ListPage> page_of_index(const Map& index, const ListQuery& q, EntryOf entry_of) {
  auto after = parse_list_cursor(q);
  if (!after) return after.error();
  const ListOrder order = list_order(q, *after);
  const std::size_t want = (q.limit == 0 ? 1 : q.limit) + 1;  // one more tells whether there is a next page
  std::vector<Entry> out;
  out.reserve(std::min(want, index.size()));
  if (q.sort == SortBy::key) {
    auto take = [&](const auto& value) {
      const Entry& e = entry_of(value);
      if (!matches(e, q)) return true;
      out.push_back(e);
      return out.size() < want;
    };
    if (!q.descending) {
      auto it = *after ? index.upper_bound((*after)->key) : index.begin();
      for (; it != index.end(); ++it) {
        if (!take(it->second)) break;
      }
    } else {
      auto it = *after ? index.lower_bound((*after)->key) : index.end();
      for (auto r = std::make_reverse_iterator(it); r != index.rend(); ++r) {
        if (!take(r->second)) break;
      }
    }
  } else {
    // A max-heap, by the query's order, of (sort value, pointer into the
    // index) (valid under the caller's lock): its top is the last entry
    // kept. Only the entries that make the page are copied, at the end.
    using Kept = std::pair<std::int64_t, const Entry*>;
    std::vector<Kept> heap;
    heap.reserve(std::min(want, index.size()));
    auto later = [&](const Kept& a, const Kept& b) {
      return list_before(a.first, a.second->key, b.first, b.second->key, order);
    };
    for (const auto& [key, value] : index) {
      const Entry& e = entry_of(value);
      if (!matches(e, q)) continue;
      const Kept kept{order.sort_value(e), &e};
      if (*after && !after_cursor(**after, e, kept.first, order)) continue;
      if (heap.size() == want) {
        if (!later(kept, heap.front())) continue;
        std::pop_heap(heap.begin(), heap.end(), later);
        heap.back() = kept;
      } else {
        heap.push_back(kept);
      }
      std::push_heap(heap.begin(), heap.end(), later);
    }
    std::sort_heap(heap.begin(), heap.end(), later);
    for (const Kept& k : heap) out.push_back(*k.second);
  }
  note_entries_copied(out.size());
  return finish_page(std::move(out), q, order);
}

}  // namespace kcache::storage
