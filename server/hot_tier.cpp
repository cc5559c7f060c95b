#include "server/hot_tier.hpp"

namespace kcache::server {

HotTier::Bytes HotTier::get(const std::string& key) {
  if (!enabled()) return nullptr;
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->bytes;
}

void HotTier::put(const std::string& key, Bytes bytes, std::uint64_t read_since) {
  if (!enabled() || !bytes || bytes->size() > max_object_bytes_ || bytes->size() > max_bytes_) return;
  std::lock_guard lock(mu_);
  if (generation_ != read_since) return;
  if (auto it = index_.find(key); it != index_.end()) drop_locked(it->second);
  used_ += bytes->size();
  lru_.push_front(Item{key, std::move(bytes), Clock::now()});
  index_[key] = lru_.begin();
  while (used_ > max_bytes_ && !lru_.empty()) drop_locked(std::prev(lru_.end()));
}

void HotTier::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  ++generation_;
  if (auto it = index_.find(key); it != index_.end()) drop_locked(it->second);
}

bool HotTier::needs_touch(const std::string& key, Clock::duration interval) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  auto now = Clock::now();
  if (now - it->second->touched < interval) return false;
  it->second->touched = now;
  return true;
}

std::uint64_t HotTier::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

std::uint64_t HotTier::bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

void HotTier::drop_locked(std::list<Item>::iterator it) {
  used_ -= it->bytes->size();
  index_.erase(it->key);
  lru_.erase(it);
}

}  // namespace kcache::server
