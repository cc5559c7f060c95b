// HotTier: recently read artifacts kept in memory, so a hot hit is answered
// on the connection's own strand — no hop to the blocking pool and back,
// which dominated the cost of a small hit (bench/server/REPORT.md).
//
// Contract:
//  - Filled only from successful storage reads (so the first read of an
//    object after a write or a restart still goes through the backend, which
//    verifies it), never from uploads. Artifacts are immutable, so an entry
//    never goes stale by content; only removal matters.
//  - Removal: the server erases keys it deletes (DELETE, /v1/evict,
//    /v1/verify?remove=true; over RESP, DEL, expiry and a SET that replaces
//    a value — RESP values are not immutable). A fill carries the
//    generation read before its storage read and is dropped when an erase
//    came in between. Objects the backend drops by itself (its own
//    LRU eviction) are noticed by touch(): while an entry is hot, at most one
//    read a second per key goes to the backend on the pool, which also keeps
//    the backend's last-access time and hit count current for its LRU; a
//    not_found there erases the entry.
//  - Only for storage one process owns (disk:, memory:). With redis://
//    replicas a DELETE through one server could not reach another's tier, so
//    the server does not use one there.
//  - Bounded by max_bytes (LRU); objects over max_object_bytes are not kept.
// Thread safety: every method may be called concurrently from any thread;
// each takes one mutex briefly and does no I/O.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/leases/lease_table.hpp"

namespace kcache::server {

class HotTier {
 public:
  using Bytes = std::shared_ptr<const std::vector<std::uint8_t>>;

  HotTier(std::uint64_t max_bytes, std::uint64_t max_object_bytes)
      : max_bytes_(max_bytes), max_object_bytes_(max_object_bytes) {}

  bool enabled() const { return max_bytes_ > 0; }
  // The object, or nullptr; a hit moves it to the front.
  Bytes get(const std::string& key);
  // Kept only when nothing was erased since `generation()` returned
  // `read_since`, taken before the read that produced `bytes`: a read that
  // raced a removal (or a RESP overwrite) must not bring the old bytes back.
  void put(const std::string& key, Bytes bytes, std::uint64_t read_since);
  // Every erase moves the generation on, whether or not the key was here.
  void erase(const std::string& key);
  std::uint64_t generation() const;
  // True at most once per `interval` per key: time to read it through the
  // backend (see the contract above).
  bool needs_touch(const std::string& key, Clock::duration interval = std::chrono::seconds(1));
  std::uint64_t bytes() const;

 private:
  struct Item {
    std::string key;
    Bytes bytes;
    Clock::time_point touched;
  };
  // REQUIRES: mu_ held.
  void drop_locked(std::list<Item>::iterator it);

  const std::uint64_t max_bytes_;
  const std::uint64_t max_object_bytes_;
  mutable std::mutex mu_;
  std::list<Item> lru_;                                                  // GUARDED_BY(mu_), front = newest
  std::unordered_map<std::string, std::list<Item>::iterator> index_;     // GUARDED_BY(mu_)
  std::uint64_t used_ = 0;                                               // GUARDED_BY(mu_)
  std::uint64_t generation_ = 0;                                         // GUARDED_BY(mu_)
};

}  // namespace kcache::server
