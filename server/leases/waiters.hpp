// Waiters: GETs with ?wait_ms parked until their key lands.
//
// A waiter is a steady_timer on its session's strand. notify(key) — called
// after a PUT stores the key or its lease is released — marks every waiter
// on the key woken and cancels its timer through the timer's own executor,
// so a waiter wakes within one hop of the landing; nothing polls. A waiter
// checks woken() before each wait, which closes the window between its
// storage lookup and the wait (see handle_get in artifact_routes.cpp).
// Thread safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

namespace kcache::server {

class Waiter {
 public:
  explicit Waiter(const boost::asio::any_io_executor& ex) : timer(ex) {}
  boost::asio::steady_timer timer;  // used only on its executor
  // Consumes a pending wake-up; true when one came since the last call.
  bool take_wake() { return woken_.exchange(false); }
  // Called before the first sleep: from then until it is removed, the
  // waiter counts in Waiters::count(). A registered waiter that has not
  // slept yet is still doing its first lookup, and may yet hit without
  // waiting; counting it would let a gauge reader act too early.
  void mark_waiting() { waiting_.store(true); }

 private:
  friend class Waiters;
  std::atomic<bool> woken_{false};
  std::atomic<bool> waiting_{false};
};

class Waiters {
 public:
  std::shared_ptr<Waiter> add(const std::string& key, const boost::asio::any_io_executor& ex);
  void remove(const std::string& key, const std::shared_ptr<Waiter>& w);
  // Wakes every waiter on `key`.
  void notify(const std::string& key);
  // Wakes every waiter (shutdown).
  void notify_all();
  // Waiters that have slept at least once (mark_waiting), not all registered.
  std::size_t count() const;

 private:
  static void wake(const std::shared_ptr<Waiter>& w);
  mutable std::mutex mu_;
  std::multimap<std::string, std::shared_ptr<Waiter>> waiting_;  // GUARDED_BY(mu_)
};

// Unregisters a waiter when the scope ends (nothing when it is null). Holds
// references: `key` and `waiter` must outlive the guard.
class WaiterGuard {
 public:
  WaiterGuard(Waiters& waiters, const std::string& key, const std::shared_ptr<Waiter>& waiter)
      : waiters_(waiters), key_(key), waiter_(waiter) {}
  ~WaiterGuard() {
    if (waiter_) waiters_.remove(key_, waiter_);
  }
  WaiterGuard(const WaiterGuard&) = delete;
  WaiterGuard& operator=(const WaiterGuard&) = delete;

 private:
  Waiters& waiters_;
  const std::string& key_;
  const std::shared_ptr<Waiter>& waiter_;
};

}  // namespace kcache::server
