#include "storage/memory/backend.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "storage/entry_query.hpp"
#include "storage/index_page.hpp"
#include "storage/tally_book.hpp"

namespace kcache::storage {
namespace {

using Bytes = std::vector<std::uint8_t>;

class MemoryBackend final : public Backend, public KeepsBreakdown {
 public:
  explicit MemoryBackend(std::uint64_t capacity) : capacity_(capacity) {}

  Result<Bytes> get(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    std::shared_ptr<const Bytes> data;
    {
      std::lock_guard lock(mu_);
      auto it = objects_.find(key);
      if (it == objects_.end()) return make_error(Errc::not_found, "no such object");
      it->second.entry.last_access_ms = now_ms();
      it->second.entry.hits++;
      tallies_.hit(it->second.entry);
      data = it->second.data;
    }
    return Bytes(*data);
  }

  // A copy of the part asked for only; no hit counted.
  Result<Bytes> read_range(const std::string& key, std::uint64_t offset, std::uint64_t length) override {
    if (auto s = check_key(key); !s) return s.error();
    std::shared_ptr<const Bytes> data;
    {
      std::lock_guard lock(mu_);
      auto it = objects_.find(key);
      if (it == objects_.end()) return make_error(Errc::not_found, "no such object");
      data = it->second.data;
    }
    if (offset >= data->size()) return Bytes{};
    auto first = data->begin() + static_cast<std::ptrdiff_t>(offset);
    return Bytes(first, first + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(length, data->size() - offset)));
  }

  Result<Entry> head(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    std::lock_guard lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return make_error(Errc::not_found, "no such object");
    return it->second.entry;
  }

  Result<PutOutcome> put(const std::string& key, const Bytes& bytes, const EntryMeta& meta) override {
    if (auto s = check_key(key); !s) return s.error();
    if (capacity_ != 0 && bytes.size() > capacity_) {
      return make_error(Errc::full, "object larger than the memory capacity");
    }
    auto data = std::make_shared<const Bytes>(bytes);  // copy outside the lock
    std::lock_guard lock(mu_);
    if (objects_.count(key) != 0) return PutOutcome::already_present;
    if (capacity_ != 0 && bytes_ + bytes.size() > capacity_ && !make_room_locked(bytes.size())) {
      return make_error(Errc::full, "memory capacity reached and only pinned entries left to evict");
    }
    Slot slot;
    slot.data = std::move(data);
    slot.entry.key = key;
    slot.entry.meta = meta;
    slot.entry.size = bytes.size();
    slot.entry.created_ms = slot.entry.last_access_ms = now_ms();
    bytes_ += bytes.size();
    tallies_.add(slot.entry);
    objects_.emplace(key, std::move(slot));
    return PutOutcome::stored;
  }

  Status remove(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    std::lock_guard lock(mu_);
    if (!erase_locked(key)) return make_error(Errc::not_found, "no such object");
    return Ok{};
  }

  Result<ListPage> list(const ListQuery& query) override {
    std::lock_guard lock(mu_);
    return page_of_index(objects_, query, [](const Slot& slot) -> const Entry& { return slot.entry; });
  }

  Result<Usage> usage() override {
    std::lock_guard lock(mu_);
    return Usage{objects_.size(), bytes_, capacity_};
  }

  Result<EvictReport> evict(const EvictPolicy& policy) override {
    std::lock_guard lock(mu_);
    auto report = select_for_eviction(snapshot_locked(), policy, bytes_, objects_.size(), now_ms());
    if (!report || policy.dry_run) return report;
    for (const auto& key : report->keys) erase_locked(key);
    return report;
  }

  Status set_pinned(const std::string& key, bool pinned) override {
    if (auto s = check_key(key); !s) return s.error();
    std::lock_guard lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return make_error(Errc::not_found, "no such object");
    it->second.entry.pinned = pinned;
    return Ok{};
  }

  Result<VerifyReport> verify(const Verifier& verifier, bool remove) override {
    VerifyReport report;
    for (const Entry& e : snapshot()) {
      std::shared_ptr<const Bytes> data;
      {
        std::lock_guard lock(mu_);
        auto it = objects_.find(e.key);
        if (it == objects_.end()) continue;
        data = it->second.data;
      }
      report.checked++;
      if (verifier(e.key, *data)) continue;
      report.corrupt.push_back(e.key);
      if (remove) {
        std::lock_guard lock(mu_);
        if (erase_locked(e.key)) report.removed++;
      }
    }
    return report;
  }

  Breakdown breakdown() override {
    std::lock_guard lock(mu_);
    return tallies_.totals();
  }

  Status ping() override { return Ok{}; }
  std::string name() const override { return "memory"; }

 private:
  struct Slot {
    std::shared_ptr<const Bytes> data;
    Entry entry;
  };

  std::vector<Entry> snapshot() {
    std::lock_guard lock(mu_);
    return snapshot_locked();
  }

  // REQUIRES: mu_ held.
  std::vector<Entry> snapshot_locked() const {
    std::vector<Entry> out;
    out.reserve(objects_.size());
    for (const auto& [key, slot] : objects_) out.push_back(slot.entry);
    return out;
  }

  // REQUIRES: mu_ held.
  bool erase_locked(const std::string& key) {
    auto it = objects_.find(key);
    if (it == objects_.end()) return false;
    bytes_ -= it->second.entry.size;
    tallies_.remove(it->second.entry);
    objects_.erase(it);
    return true;
  }

  // Evicts unpinned LRU entries until `incoming` more bytes fit; false if
  // they do not even then. REQUIRES: mu_ held.
  bool make_room_locked(std::uint64_t incoming) {
    auto entries = snapshot_locked();
    sort_lru(entries);
    for (const Entry& e : entries) {
      if (bytes_ + incoming <= capacity_) break;
      if (!e.pinned) erase_locked(e.key);
    }
    return bytes_ + incoming <= capacity_;
  }

  const std::uint64_t capacity_;
  std::mutex mu_;
  std::map<std::string, Slot> objects_;  // GUARDED_BY(mu_)
  std::uint64_t bytes_ = 0;              // GUARDED_BY(mu_)
  TallyBook tallies_;                    // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<Backend> make_memory_backend(std::uint64_t capacity_bytes) {
  return std::make_unique<MemoryBackend>(capacity_bytes);
}

}  // namespace kcache::storage
