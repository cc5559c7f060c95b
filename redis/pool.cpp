#include "redis/pool.hpp"

#include <sys/time.h>

#include <cerrno>
#include <cstring>

namespace kcache::redis {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

void append(redisContext* ctx, const Args& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(ctx, static_cast<int>(args.size()), argv.data(), lens.data());
}

}  // namespace

std::optional<Error> reply_error(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_ERROR) return std::nullopt;
  std::string msg(r->str, r->len);
  Errc code = Errc::internal;
  if (msg.rfind("OOM", 0) == 0) code = Errc::full;
  if (msg.rfind("LOADING", 0) == 0 || msg.rfind("BUSY", 0) == 0 || msg.rfind("MASTERDOWN", 0) == 0 ||
      msg.rfind("READONLY", 0) == 0 || msg.rfind("CLUSTERDOWN", 0) == 0 || msg.rfind("TRYAGAIN", 0) == 0 ||
      msg.rfind("MOVED ", 0) == 0 || msg.rfind("ASK ", 0) == 0) {
    // A Cluster that is failing over or resharding: MOVED and ASK reach a
    // caller only after the router's bounded redirects ran out.
    code = Errc::unavailable;
  }
  return make_error(code, "redis: " + msg);
}

Error RedisConn::context_error() const {
  // hiredis reports a socket timeout as REDIS_ERR_IO with errno EAGAIN.
  bool timed_out = ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  if (timed_out || std::strstr(ctx_->errstr, "temporarily unavailable") != nullptr) {
    return make_error(Errc::timeout, "redis: no reply within the operation timeout");
  }
  return make_error(Errc::unavailable, std::string("redis: ") + ctx_->errstr);
}

Result<Reply> RedisConn::command(const Args& args) {
  auto replies = pipeline({args});
  if (!replies) return replies.error();
  return std::move(replies->front());
}

Result<std::vector<Reply>> RedisConn::pipeline(const std::vector<Args>& cmds) {
  auto out = pipeline_raw(cmds);
  if (!out) return out;
  for (const auto& r : *out) {
    if (auto e = reply_error(r.get())) return *e;
  }
  return out;
}

Result<std::vector<Reply>> RedisConn::pipeline_raw(const std::vector<Args>& cmds) {
  if (broken()) return context_error();
  for (const auto& args : cmds) append(ctx_.get(), args);
  std::vector<Reply> out;
  out.reserve(cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK) return context_error();
    out.emplace_back(static_cast<redisReply*>(raw));
  }
  return out;
}

RedisPool::~RedisPool() = default;

Result<std::unique_ptr<RedisConn>> RedisPool::lease(bool& reused) {
  {
    std::unique_lock lock(mu_);
    bool ok = freed_.wait_for(lock, opts_.op_timeout, [&] { return !idle_.empty() || open_ < opts_.pool_size; });
    if (!ok) return make_error(Errc::timeout, "redis: every pooled connection busy for the operation timeout");
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
      return conn;
    }
    open_++;  // reserve a slot, connect outside the lock
  }
  reused = false;
  auto conn = connect();
  if (!conn) {
    std::lock_guard lock(mu_);
    open_--;
    freed_.notify_one();
  }
  return conn;
}

Result<std::unique_ptr<RedisConn>> RedisPool::connect() {
  std::string where = opts_.host + ":" + std::to_string(opts_.port);
  redisContext* ctx = redisConnectWithTimeout(opts_.host.c_str(), opts_.port, to_timeval(opts_.connect_timeout));
  if (ctx == nullptr) return make_error(Errc::unavailable, "redis: cannot allocate a context for " + where);
  auto conn = std::make_unique<RedisConn>(ctx);
  if (ctx->err != 0) return make_error(Errc::unavailable, "redis: connect " + where + ": " + ctx->errstr);
  redisSetTimeout(ctx, to_timeval(opts_.op_timeout));
  if (!opts_.password.empty()) {
    Args auth = {"AUTH"};
    if (!opts_.user.empty()) auth.push_back(opts_.user);
    auth.push_back(opts_.password);
    auto r = conn->command(auth);
    if (!r) {
      // Not the server's message verbatim: keep the credentials out of logs.
      if (r.error().code == Errc::internal) return make_error(Errc::unavailable, "redis: AUTH rejected at " + where);
      return r.error();
    }
  }
  if (opts_.db != 0) {
    std::string db = std::to_string(opts_.db);
    if (auto r = conn->command({"SELECT", db}); !r) return r.error();
  }
  return conn;
}

void RedisPool::give_back(std::unique_ptr<RedisConn> conn, bool broken) {
  {
    std::lock_guard lock(mu_);
    if (broken) {
      open_--;
    } else {
      idle_.push_back(std::move(conn));
    }
  }
  freed_.notify_one();
}

void RedisPool::drop_idle() {
  std::vector<std::unique_ptr<RedisConn>> dead;
  {
    std::lock_guard lock(mu_);
    dead.swap(idle_);
    open_ -= dead.size();
  }
  freed_.notify_all();
}

}  // namespace kcache::redis
