// RedisPool: a bounded pool of hiredis synchronous connections.
//
// Each command runs on the caller's thread on a connection leased from the
// pool. A connection whose context reports an error (reset, EOF, timeout)
// is broken: it is freed instead of returned, and the next lease connects
// afresh (redisConnectWithTimeout with connect_timeout, then redisSetTimeout
// with op_timeout, AUTH, SELECT). run() retries a call once on a fresh
// connection when it failed, other than by timeout, on a reused one: that
// is how a Redis restart is absorbed without reopening the backend, while a
// hung Redis still costs a caller one op_timeout, not two.
// Error mapping: refused / reset / EOF -> Errc::unavailable; no answer within
// op_timeout -> Errc::timeout; an "OOM" reply -> Errc::full; other error
// replies -> Errc::internal. Secrets never appear in messages.
// Thread safety: the pool is thread-safe; a RedisConn is used by one thread.
#pragma once

#include <hiredis/hiredis.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "redis/options.hpp"

namespace kcache::redis {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;
using Args = std::vector<std::string_view>;

class RedisConn {
 public:
  explicit RedisConn(redisContext* ctx) : ctx_(ctx, &redisFree) {}

  Result<Reply> command(const Args& args);
  // Sends all commands, then reads all replies (one round trip).
  Result<std::vector<Reply>> pipeline(const std::vector<Args>& cmds);
  // As pipeline(), but error replies stay replies (a Cluster router reads
  // MOVED and ASK from them); only a connection failure is an Error.
  Result<std::vector<Reply>> pipeline_raw(const std::vector<Args>& cmds);
  bool broken() const { return ctx_->err != 0; }

 private:
  Error context_error() const;
  std::unique_ptr<redisContext, decltype(&redisFree)> ctx_;
};

class RedisPool {
 public:
  explicit RedisPool(ConnectOptions opts) : opts_(std::move(opts)) {}
  ~RedisPool();

  // Calls fn(RedisConn&) -> Result<T>; see the retry rule above.
  template <typename F>
  auto run(F&& fn) -> decltype(fn(std::declval<RedisConn&>())) {
    for (int attempt = 0;; ++attempt) {
      bool reused = false;
      auto conn = lease(reused);
      if (!conn) return conn.error();
      auto result = fn(**conn);
      bool broken = (*conn)->broken();
      give_back(std::move(*conn), broken);
      // A timeout is not retried: the caller's budget is one op_timeout.
      bool timed_out = !result.ok() && result.error().code == Errc::timeout;
      if (!broken || !reused || timed_out || attempt > 0) return result;
      drop_idle();  // they are likely dead too (a restart)
    }
  }

 private:
  Result<std::unique_ptr<RedisConn>> lease(bool& reused);
  Result<std::unique_ptr<RedisConn>> connect();
  void give_back(std::unique_ptr<RedisConn> conn, bool broken);
  void drop_idle();

  const ConnectOptions opts_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<RedisConn>> idle_;  // GUARDED_BY(mu_)
  std::size_t open_ = 0;                          // GUARDED_BY(mu_): leased + idle
};

// Error for an error reply, or nullopt if `r` is not one.
std::optional<Error> reply_error(const redisReply* r);

}  // namespace kcache::redis
