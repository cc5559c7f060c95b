#include "server/leases/waiters.hpp"

#include <boost/asio/post.hpp>

namespace kcache::server {

std::shared_ptr<Waiter> Waiters::add(const std::string& key, const boost::asio::any_io_executor& ex) {
  auto w = std::make_shared<Waiter>(ex);
  std::lock_guard lock(mu_);
  waiting_.emplace(key, w);
  return w;
}

void Waiters::remove(const std::string& key, const std::shared_ptr<Waiter>& w) {
  std::lock_guard lock(mu_);
  auto [b, e] = waiting_.equal_range(key);
  for (auto it = b; it != e; ++it) {
    if (it->second == w) {
      waiting_.erase(it);
      return;
    }
  }
}

void Waiters::wake(const std::shared_ptr<Waiter>& w) {
  w->woken_.store(true);
  // The timer belongs to the waiter's strand; cancel it there.
  boost::asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
}

void Waiters::notify(const std::string& key) {
  std::lock_guard lock(mu_);
  auto [b, e] = waiting_.equal_range(key);
  for (auto it = b; it != e; ++it) wake(it->second);
}

void Waiters::notify_all() {
  std::lock_guard lock(mu_);
  for (auto& [k, w] : waiting_) wake(w);
}

std::size_t Waiters::count() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [k, w] : waiting_) n += w->waiting_.load() ? 1 : 0;
  return n;
}

}  // namespace kcache::server
