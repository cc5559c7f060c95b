#include "storage/disk/backend.hpp"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/hex.hpp"
#include "common/sha256.hpp"
#include "storage/disk/files.hpp"
#include "storage/disk/publish.hpp"
#include "storage/disk/rebuild.hpp"
#include "storage/disk/root_lock.hpp"
#include "storage/entry_query.hpp"
#include "storage/index_page.hpp"
#include "storage/tally_book.hpp"

namespace kcache::storage {
namespace {

using Bytes = std::vector<std::uint8_t>;
using disk::Layout;

struct Record {
  disk::Sidecar sc;
  std::uint64_t generation = 0;  // which copy of the key this is (a removed and re-put key gets a new one)
  bool verified = false;     // hashed since this process published or loaded it
  bool stats_dirty = false;  // last access / hits not yet written to the sidecar
};

class DiskBackend final : public Backend, public KeepsBreakdown {
 public:
  DiskBackend(DiskOptions opts, int lock_fd, std::vector<disk::Sidecar> loaded)
      : opts_(std::move(opts)), layout_{opts_.root}, lock_fd_(lock_fd) {
    for (auto& sc : loaded) {
      bytes_ += sc.entry.size;
      tallies_.add(sc.entry);
      std::string key = sc.entry.key;
      index_.emplace(std::move(key), Record{std::move(sc), ++generations_});
    }
    worker_ = std::thread([this] { background_loop(); });
  }

  ~DiskBackend() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
    flush_stats();
    ::close(lock_fd_);  // releases the flock
  }

  Result<Bytes> get(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    auto bytes = read_checked(key, nullptr);
    if (!bytes) return bytes;
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      it->second.sc.entry.last_access_ms = now_ms();
      it->second.sc.entry.hits++;
      tallies_.hit(it->second.sc.entry);
      it->second.stats_dirty = true;
    }
    return bytes;
  }

  Result<Entry> head(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return make_error(Errc::not_found, "no such object");
    return it->second.sc.entry;
  }

  Result<PutOutcome> put(const std::string& key, const Bytes& bytes, const EntryMeta& meta) override {
    return put_span(key, std::span<const std::uint8_t>(bytes), meta);
  }

  // Written to tmp/ straight from `bytes` (a spooled upload's mapping): no
  // copy of the object is made in memory.
  Result<PutOutcome> put_span(const std::string& key, std::span<const std::uint8_t> bytes,
                              const EntryMeta& meta) override {
    if (auto s = check_key(key); !s) return s.error();
    if (opts_.capacity_bytes != 0 && bytes.size() > opts_.capacity_bytes) {
      return make_error(Errc::full, "object larger than the disk capacity");
    }
    {
      std::unique_lock lock(mu_);
      busy_cv_.wait(lock, [&] { return busy_.count(key) == 0; });
      if (index_.count(key) != 0) return PutOutcome::already_present;
      busy_.insert(key);  // later puts of this key wait for our outcome
    }
    auto result = put_claimed(key, bytes, meta);
    release(key);
    if (result && *result == PutOutcome::stored && over(opts_.high_watermark)) wake_.notify_all();
    return result;
  }

  // pread of the part asked for; the open descriptor keeps the inode alive
  // if eviction unlinks it meanwhile.
  Result<Bytes> read_range(const std::string& key, std::uint64_t offset, std::uint64_t length) override {
    if (auto s = check_key(key); !s) return s.error();
    std::uint64_t size;
    {
      std::lock_guard lock(mu_);
      auto it = index_.find(key);
      if (it == index_.end()) return make_error(Errc::not_found, "no such object");
      size = it->second.sc.entry.size;
    }
    auto bytes = disk::read_file_range(layout_.object(key), offset, length, size);
    if (opts_.fault_hook) opts_.fault_hook->after_read(key);
    if (!bytes && bytes.error().code == Errc::not_found) return make_error(Errc::not_found, "no such object");
    if (!bytes && bytes.error().code == Errc::corrupt) {
      return make_error(Errc::corrupt, "object " + key + ": " + bytes.error().message);
    }
    return bytes;
  }

  Status remove(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    if (!remove_entry(key, /*for_eviction=*/false)) return make_error(Errc::not_found, "no such object");
    return Ok{};
  }

  // Written to the sidecar at once and durably (tmp/, fsync, rename, fsync
  // of the directory), unlike the advisory stats: a pin that was answered
  // Ok survives a crash. The key is busy meanwhile, so no eviction, removal
  // or stats write-back of it interleaves.
  Status set_pinned(const std::string& key, bool pinned) override {
    if (auto s = check_key(key); !s) return s.error();
    disk::Sidecar sc;
    {
      std::unique_lock lock(mu_);
      busy_cv_.wait(lock, [&] { return busy_.count(key) == 0; });
      auto it = index_.find(key);
      if (it == index_.end()) return make_error(Errc::not_found, "no such object");
      if (it->second.sc.entry.pinned == pinned) return Ok{};
      sc = it->second.sc;
      busy_.insert(key);
    }
    sc.entry.pinned = pinned;
    bool replaced = false;
    Status written = disk::replace_sidecar(layout_, sc, replaced);
    if (replaced) {  // the sidecar says so now, even if its directory's fsync failed
      std::lock_guard lock(mu_);
      if (auto it = index_.find(key); it != index_.end()) it->second.sc.entry.pinned = pinned;
    }
    release(key);
    return written;
  }

  Result<ListPage> list(const ListQuery& query) override {
    std::lock_guard lock(mu_);
    return page_of_index(index_, query, [](const Record& rec) -> const Entry& { return rec.sc.entry; });
  }

  Result<Usage> usage() override {
    std::lock_guard lock(mu_);
    return Usage{index_.size(), bytes_, opts_.capacity_bytes};
  }

  Result<EvictReport> evict(const EvictPolicy& policy) override {
    std::uint64_t total, entries;
    {
      std::lock_guard lock(mu_);
      total = bytes_;
      entries = index_.size();
    }
    auto report = select_for_eviction(snapshot(true), policy, total, entries, now_ms());
    if (!report || policy.dry_run) return report;
    EvictReport done;
    for (const auto& key : report->keys) {
      auto size = remove_entry(key, /*for_eviction=*/true);
      if (!size) continue;  // removed meanwhile, a read started, or pinned
      done.keys.push_back(key);
      done.bytes += *size;
    }
    return done;
  }

  Result<VerifyReport> verify(const Verifier& verifier, bool remove) override {
    VerifyReport report;
    for (const Entry& e : snapshot(false)) {
      auto bytes = read_checked(e.key, &verifier, /*force_hash=*/true, /*quarantine=*/remove);
      if (!bytes && bytes.error().code != Errc::corrupt) continue;  // removed meanwhile
      report.checked++;
      if (bytes) continue;
      report.corrupt.push_back(e.key);
      if (remove) report.removed++;
    }
    return report;
  }

  Status ping() override {
    if (::access(layout_.objects().c_str(), W_OK) != 0) return disk::errno_error("access objects/", errno);
    return Ok{};
  }

  std::string name() const override { return "disk"; }

  Breakdown breakdown() override {
    std::lock_guard lock(mu_);
    return tallies_.totals();
  }

 private:
  // REQUIRES: the caller holds `key` in busy_ and it is absent from index_.
  Result<PutOutcome> put_claimed(const std::string& key, std::span<const std::uint8_t> bytes, const EntryMeta& meta) {
    if (opts_.capacity_bytes != 0 && !make_room(bytes.size())) {
      return make_error(Errc::full, "disk capacity reached and nothing evictable");
    }
    disk::Sidecar sc;
    sc.entry.key = key;
    sc.entry.meta = meta;
    sc.entry.size = bytes.size();
    sc.entry.created_ms = sc.entry.last_access_ms = now_ms();
    sc.sha256 = to_hex(sha256(bytes));
    auto published = disk::publish(layout_, sc, bytes, opts_.fault_hook.get());
    if (!published || *published != PutOutcome::stored) return published;
    std::lock_guard lock(mu_);
    bytes_ += sc.entry.size;
    tallies_.add(sc.entry);
    index_.emplace(key, Record{std::move(sc), ++generations_, /*verified=*/false});
    return PutOutcome::stored;
  }

  // Reads an indexed object, hashing it on its first read (or always with
  // force_hash) and running `verifier` if given; quarantines it on failure.
  Result<Bytes> read_checked(const std::string& key, const Verifier* verifier, bool force_hash = false,
                             bool quarantine = true) {
    disk::Sidecar sc;
    bool verified;
    std::uint64_t generation;
    {
      std::lock_guard lock(mu_);
      auto it = index_.find(key);
      if (it == index_.end()) return make_error(Errc::not_found, "no such object");
      sc = it->second.sc;
      verified = it->second.verified && !force_hash;
      generation = it->second.generation;
      readers_[key]++;  // pins the entry against eviction
    }
    auto bytes = disk::read_file(layout_.object(key));
    unpin(key);
    if (opts_.fault_hook) opts_.fault_hook->after_read(key);
    if (!bytes) {
      if (bytes.error().code == Errc::not_found) return make_error(Errc::not_found, "no such object");
      return bytes.error();
    }
    std::string why;
    if (bytes->size() != sc.entry.size) {
      why = "size differs from its sidecar";
    } else if (!verified && to_hex(sha256(*bytes)) != sc.sha256) {
      why = "SHA-256 differs from its sidecar";
    } else if (verifier != nullptr && !(*verifier)(key, *bytes)) {
      why = "rejected by the verifier";
    }
    if (why.empty()) {
      std::lock_guard lock(mu_);
      if (auto it = index_.find(key); it != index_.end() && it->second.generation == generation) {
        it->second.verified = true;
      }
      return bytes;
    }
    if (!quarantine) return make_error(Errc::corrupt, "object " + key + " " + why);
    // Only the copy that was read: if the key was removed and stored again
    // since, the files now under its name are the newer copy, not ours.
    if (claim_indexed(key, false, generation)) {
      disk::quarantine_files(layout_, key);
      release(key);
    }
    return make_error(Errc::corrupt, "object " + key + " " + why + "; moved to quarantine/");
  }

  void unpin(const std::string& key) {
    std::lock_guard lock(mu_);
    if (--readers_[key] == 0) readers_.erase(key);
  }

  // Takes `key` out of the index and marks it busy, so that its files can be
  // changed without the lock; returns its size. Nothing if absent. For
  // eviction also nothing if being read, busy or pinned: eviction runs
  // inside put(), which holds its own key busy, so waiting here could
  // deadlock two puts evicting each other's keys; and the pin is checked
  // here, under the lock, so a pin set after eviction chose the entry
  // still holds.
  // With `generation`, only that copy of the key.
  std::optional<std::uint64_t> claim_indexed(const std::string& key, bool for_eviction,
                                             std::optional<std::uint64_t> generation = std::nullopt) {
    std::unique_lock lock(mu_);
    if (for_eviction && busy_.count(key) != 0) return std::nullopt;
    busy_cv_.wait(lock, [&] { return busy_.count(key) == 0; });
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    if (generation && it->second.generation != *generation) return std::nullopt;
    if (for_eviction && (readers_.count(key) != 0 || it->second.sc.entry.pinned)) return std::nullopt;
    std::uint64_t size = it->second.sc.entry.size;
    bytes_ -= size;
    tallies_.remove(it->second.sc.entry);
    index_.erase(it);
    busy_.insert(key);
    return size;
  }

  void release(const std::string& key) {
    {
      std::lock_guard lock(mu_);
      busy_.erase(key);
    }
    busy_cv_.notify_all();
  }

  // Sidecar first: without it the object is no longer an entry, even if we
  // crash before unlinking the object.
  std::optional<std::uint64_t> remove_entry(const std::string& key, bool for_eviction) {
    auto size = claim_indexed(key, for_eviction);
    if (!size) return std::nullopt;
    ::unlink(layout_.sidecar(key).c_str());
    ::unlink(layout_.object(key).c_str());
    release(key);
    return size;
  }

  bool over(double fraction) {
    std::lock_guard lock(mu_);
    return opts_.capacity_bytes != 0 &&
           static_cast<double>(bytes_) > fraction * static_cast<double>(opts_.capacity_bytes);
  }

  // Evicts unpinned LRU entries until usage + incoming fits within `target` bytes.
  bool evict_lru_to(std::uint64_t target, std::uint64_t incoming) {
    auto entries = snapshot(true);
    sort_lru(entries);
    for (const Entry& e : entries) {
      {
        std::lock_guard lock(mu_);
        if (bytes_ + incoming <= target) return true;
      }
      if (!e.pinned) remove_entry(e.key, /*for_eviction=*/true);
    }
    std::lock_guard lock(mu_);
    return bytes_ + incoming <= target;
  }

  bool make_room(std::uint64_t incoming) { return evict_lru_to(opts_.capacity_bytes, incoming); }

  std::vector<Entry> snapshot(bool skip_reading) {
    std::lock_guard lock(mu_);
    std::vector<Entry> out;
    out.reserve(index_.size());
    for (const auto& [key, rec] : index_) {
      if (skip_reading && readers_.count(key) != 0) continue;
      out.push_back(rec.sc.entry);
    }
    return out;
  }

  // Writes changed last access / hits back to the sidecars
  // (disk::write_back: never a partial sidecar); one that could not be
  // replaced stays dirty, for the next time. The stats are advisory.
  void flush_stats() {
    std::vector<disk::Sidecar> dirty;
    {
      std::lock_guard lock(mu_);
      for (auto& [key, rec] : index_) {
        if (!rec.stats_dirty || busy_.count(key) != 0) continue;
        rec.stats_dirty = false;
        dirty.push_back(rec.sc);
        busy_.insert(key);
      }
    }
    if (dirty.empty()) return;
    std::vector<bool> replaced = disk::write_back(layout_, dirty);
    for (std::size_t i = 0; i < dirty.size(); ++i) {
      const std::string& key = dirty[i].entry.key;
      if (!replaced[i]) {
        std::lock_guard lock(mu_);
        if (auto it = index_.find(key); it != index_.end()) it->second.stats_dirty = true;  // next time
      }
      release(key);
    }
  }

  void background_loop() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, opts_.stats_flush_interval);
      if (stopping_) break;
      lock.unlock();
      if (over(opts_.high_watermark)) {
        auto low = static_cast<std::uint64_t>(opts_.low_watermark * static_cast<double>(opts_.capacity_bytes));
        evict_lru_to(low, 0);
      }
      flush_stats();
      lock.lock();
    }
  }

  const DiskOptions opts_;
  const Layout layout_;
  const int lock_fd_;
  std::mutex mu_;
  std::condition_variable busy_cv_;  // a key left busy_
  std::condition_variable wake_;     // background work or stop
  std::map<std::string, Record> index_;   // GUARDED_BY(mu_)
  std::map<std::string, int> readers_;    // GUARDED_BY(mu_): reads in progress
  std::set<std::string> busy_;            // GUARDED_BY(mu_): keys whose files are changing
  std::uint64_t bytes_ = 0;               // GUARDED_BY(mu_)
  TallyBook tallies_;                     // GUARDED_BY(mu_): by target and mode
  bool stopping_ = false;                 // GUARDED_BY(mu_)
  std::uint64_t generations_ = 0;         // GUARDED_BY(mu_) (and the constructor)
  std::thread worker_;
};

}  // namespace

Result<std::unique_ptr<Backend>> open_disk_backend(const DiskOptions& options) {
  if (options.root.empty()) return make_error(Errc::invalid_argument, "disk backend needs a path");
  if (!(options.low_watermark > 0 && options.low_watermark <= options.high_watermark &&
        options.high_watermark <= 1.0)) {
    return make_error(Errc::invalid_argument, "disk watermarks must satisfy 0 < low <= high <= 1");
  }
  auto root = disk::lock_root(Layout{options.root});
  if (!root) return root.error();
  return std::unique_ptr<Backend>(std::make_unique<DiskBackend>(options, root->lock_fd, std::move(root->entries)));
}

}  // namespace kcache::storage
