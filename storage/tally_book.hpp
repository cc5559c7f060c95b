// Per-target and per-mode totals (entries, bytes, hits) that a backend with
// an in-memory index (memory, disk) keeps as entries come, go and are read,
// so /v1/stats' breakdown costs O(targets + modes), not a scan of the store.
// Thread safety: none; the owning backend calls it under its index lock.
#pragma once

#include "storage/capabilities.hpp"

namespace kcache::storage {

class TallyBook {
 public:
  void add(const Entry& e) {
    for (Tally* t : {&book_.by_target[e.meta.target], &book_.by_mode[e.meta.mode]}) {
      t->entries++;
      t->bytes += e.size;
      t->hits += e.hits;
    }
  }

  void remove(const Entry& e) {
    drop(book_.by_target, e.meta.target, e);
    drop(book_.by_mode, e.meta.mode, e);
  }

  void hit(const Entry& e) {
    book_.by_target[e.meta.target].hits++;
    book_.by_mode[e.meta.mode].hits++;
  }

  const Breakdown& totals() const { return book_; }

 private:
  static void drop(std::map<std::string, Tally>& m, const std::string& name, const Entry& e) {
    auto it = m.find(name);
    if (it == m.end()) return;
    Tally& t = it->second;
    t.entries -= std::min<std::uint64_t>(t.entries, 1);
    t.bytes -= std::min(t.bytes, e.size);
    t.hits -= std::min(t.hits, e.hits);
    if (t.entries == 0) m.erase(it);
  }

  Breakdown book_;
};

}  // namespace kcache::storage
