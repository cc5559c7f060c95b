// RedisLandings: PUBLISH on landing, a subscriber thread that wakes local
// waiters. See server/leases/landings.hpp and server/leases/redis_replicas.hpp.
#include <sys/socket.h>
#include <sys/time.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "redis/link.hpp"
#include "server/leases/landings.hpp"

namespace kcache::server {

namespace {

constexpr const char* k_channel = "kcache:landed";

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

class RedisLandings final : public Landings {
 public:
  RedisLandings(std::shared_ptr<redis::RedisLink> link, redis::ConnectOptions opts, Waiters& waiters)
      : link_(std::move(link)), opts_(std::move(opts)), waiters_(waiters), thread_([this] { run(); }) {}

  ~RedisLandings() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // ends the blocking read
    }
    cv_.notify_all();
    thread_.join();
  }

  void publish(const std::string& key) override {
    waiters_.notify(key);  // this replica's waiters need no round trip
    // In a Cluster, PUBLISH on any node reaches the subscribers on every node.
    auto r = link_->command({"PUBLISH", k_channel, key});
    if (!r) spdlog::warn("PUBLISH {} failed: {} (waiters on other replicas wake at their lease's expiry)",
                         k_channel, r.error().message);
  }

 private:
  void run() {
    auto backoff = std::chrono::milliseconds(100);
    for (;;) {
      if (listen()) {
        backoff = std::chrono::milliseconds(100);
      } else {
        next_node_++;  // a Cluster: try the next node it knows
      }
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, backoff, [this] { return stop_; })) return;
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
  }

  // One subscription, until the connection ends. False when it never got going.
  bool listen() {
    const auto nodes = link_->endpoints();
    if (nodes.empty()) return false;
    const redis::Endpoint node = nodes[next_node_ % nodes.size()];
    const std::string where = node.text();
    std::unique_ptr<redisContext, decltype(&redisFree)> ctx(
        redisConnectWithTimeout(node.host.c_str(), node.port, to_timeval(opts_.connect_timeout)), &redisFree);
    if (!ctx || ctx->err) {
      warn_once("landing subscriber cannot connect to " + where);
      return false;
    }
    redisSetTimeout(ctx.get(), to_timeval(opts_.op_timeout));
    redisEnableKeepAlive(ctx.get());
    if (!opts_.password.empty()) {
      std::vector<const char*> argv = {"AUTH"};
      std::vector<size_t> lens = {4};
      if (!opts_.user.empty()) {
        argv.push_back(opts_.user.c_str());
        lens.push_back(opts_.user.size());
      }
      argv.push_back(opts_.password.c_str());
      lens.push_back(opts_.password.size());
      redis::Reply auth(static_cast<redisReply*>(
          redisCommandArgv(ctx.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
      if (!auth || auth->type == REDIS_REPLY_ERROR) {
        warn_once("landing subscriber: AUTH rejected at " + where);  // never the password
        return false;
      }
    }
    redis::Reply sub(static_cast<redisReply*>(redisCommand(ctx.get(), "SUBSCRIBE %s", k_channel)));
    if (!sub || sub->type != REDIS_REPLY_ARRAY) {
      warn_once("landing subscriber: SUBSCRIBE failed at " + where);
      return false;
    }
    redisSetTimeout(ctx.get(), timeval{0, 0});  // from now on, wait for messages indefinitely
    {
      std::lock_guard lock(mu_);
      if (stop_) return true;
      fd_ = ctx->fd;
    }
    warned_ = false;
    spdlog::info("subscribed to {} at {}", k_channel, where);
    waiters_.notify_all();  // whatever landed while we were not subscribed
    for (;;) {
      void* raw = nullptr;
      if (redisGetReply(ctx.get(), &raw) != REDIS_OK) break;
      redis::Reply msg(static_cast<redisReply*>(raw));
      if (msg && msg->type == REDIS_REPLY_ARRAY && msg->elements == 3 && msg->element[2]->type == REDIS_REPLY_STRING) {
        waiters_.notify(std::string(msg->element[2]->str, msg->element[2]->len));
      }
    }
    std::lock_guard lock(mu_);
    fd_ = -1;
    if (!stop_) spdlog::warn("landing subscription to {} lost: {}; reconnecting", where, ctx->errstr);
    return true;
  }

  void warn_once(const std::string& what) {
    if (!warned_) spdlog::warn("{}; retrying", what);
    warned_ = true;
  }

  std::shared_ptr<redis::RedisLink> link_;
  const redis::ConnectOptions opts_;
  Waiters& waiters_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  int fd_ = -1;        // GUARDED_BY(mu_): the subscribed socket, for shutdown
  bool warned_ = false;  // subscriber thread only
  std::size_t next_node_ = 0;  // subscriber thread only: which of link_->endpoints() to subscribe at
  std::thread thread_;   // last: starts after everything above is built
};

}  // namespace

std::unique_ptr<Landings> make_redis_landings(std::shared_ptr<redis::RedisLink> link, redis::ConnectOptions opts,
                                              Waiters& waiters) {
  return std::make_unique<RedisLandings>(std::move(link), std::move(opts), waiters);
}

}  // namespace kcache::server
