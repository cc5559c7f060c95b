// Connections: the live client connections, counted for --max-connections
// and /metrics, and reachable for a graceful drain (close the idle ones;
// busy ones finish their request and then close).
// Thread safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kcache::server {

// What the drain needs from a session; implemented in http_session.cpp.
class SessionHandle {
 public:
  virtual ~SessionHandle() = default;
  // Posts to the session's strand: close now if waiting for a request.
  virtual void close_if_idle() = 0;
};

class Connections {
 public:
  // Registers a session; the returned id unregisters it.
  std::uint64_t add(const std::shared_ptr<SessionHandle>& s) {
    std::lock_guard lock(mu_);
    auto id = ++next_id_;
    live_.emplace(id, s);
    count_.store(live_.size());
    return id;
  }
  void remove(std::uint64_t id) {
    std::lock_guard lock(mu_);
    live_.erase(id);
    count_.store(live_.size());
  }
  std::uint64_t count() const { return count_.load(); }
  // The sessions are asked outside the lock, and the references taken here
  // drop outside it too: the last reference to a session that ended
  // meanwhile may be this one, and its destructor calls remove(), which
  // locks mu_ (under the lock that was a self-deadlock of an io thread, and
  // then of the drain: a server that never stopped).
  void close_idle() {
    std::vector<std::shared_ptr<SessionHandle>> sessions;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, w] : live_) {
        if (auto s = w.lock()) sessions.push_back(std::move(s));
      }
    }
    for (auto& s : sessions) s->close_if_idle();
  }

 private:
  std::mutex mu_;
  std::uint64_t next_id_ = 0;                                   // GUARDED_BY(mu_)
  std::map<std::uint64_t, std::weak_ptr<SessionHandle>> live_;  // GUARDED_BY(mu_)
  std::atomic<std::uint64_t> count_{0};
};

}  // namespace kcache::server
