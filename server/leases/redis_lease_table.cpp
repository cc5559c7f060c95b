// RedisLeaseTable and make_redis_replica_parts(): see server/leases/redis_replicas.hpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "redis/cluster.hpp"
#include "redis/link.hpp"
#include "redis/url.hpp"
#include "server/leases/redis_replicas.hpp"

namespace kcache::server {

// Defined in redis_landings.cpp.
std::unique_ptr<Landings> make_redis_landings(std::shared_ptr<redis::RedisLink> link, redis::ConnectOptions opts,
                                              Waiters& waiters);

namespace {

constexpr const char* k_live = "kcache:{leases}:live";
constexpr const char* k_counters = "kcache:{leases}:counters";

std::string lease_key(const std::string& hex) { return "kcache:{leases}:lease:" + hex; }
std::string info_key(const std::string& hex) { return "kcache:{leases}:info:" + hex; }

// Redis's own clock, so every replica's bookkeeping agrees.
#define KCACHE_LUA_NOW                 \
  "redis.replicate_commands()\n"      \
  "local t = redis.call('TIME')\n"    \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

// KEYS: lease info live counters; ARGV: token ttl_ms holder hex max_leases.
// → {1, 0} granted, {0, pttl} held by another, {2, 0} the live set holds
// max_leases (after dropping the expired members, counted as expired).
constexpr const char* k_acquire = KCACHE_LUA_NOW R"(
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, redis.call('PTTL', KEYS[1])} end
local dropped = redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if dropped > 0 then redis.call('HINCRBY', KEYS[4], 'expired', dropped) end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then return {2, 0} end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'holder', ARGV[3], 'acquired', now, 'renewals', 0)
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  if redis.call('ZSCORE', KEYS[3], ARGV[4]) then redis.call('HINCRBY', KEYS[4], 'expired', 1) end
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[4])
  redis.call('HINCRBY', KEYS[4], 'granted', 1)
  return {1, 0}
end
return {0, redis.call('PTTL', KEYS[1])}
)";

// KEYS: lease info live counters; ARGV: token ttl_ms hex.
// → {1, ttl} renewed, {2, pttl} not the holder, {0, 0} no lease.
constexpr const char* k_renew = KCACHE_LUA_NOW R"(
local cur = redis.call('GET', KEYS[1])
if not cur then return {0, 0} end
if redis.sha1hex(cur) ~= redis.sha1hex(ARGV[1]) then return {2, redis.call('PTTL', KEYS[1])} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 'renewals', 1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[3])
redis.call('HINCRBY', KEYS[4], 'renewed', 1)
return {1, tonumber(ARGV[2])}
)";

// KEYS: lease info live counters; ARGV: token hex. → 1 released, 2 not the holder, 0 no lease.
constexpr const char* k_release = R"(
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if redis.sha1hex(cur) ~= redis.sha1hex(ARGV[1]) then return 2 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('HINCRBY', KEYS[4], 'released', 1)
return 1
)";

// KEYS: live counters. Drops expired members, counting them. → live count.
constexpr const char* k_sweep = KCACHE_LUA_NOW R"(
local n = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if n > 0 then redis.call('HINCRBY', KEYS[2], 'expired', n) end
return redis.call('ZCARD', KEYS[1])
)";

#undef KCACHE_LUA_NOW

std::int64_t int_at(const redisReply* r, std::size_t i) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return 0;
  const redisReply* e = r->element[i];
  if (e->type == REDIS_REPLY_INTEGER) return e->integer;
  if (e->type == REDIS_REPLY_STRING) return std::strtoll(e->str, nullptr, 10);
  return 0;
}

std::string str_at(const redisReply* r, std::size_t i) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return {};
  const redisReply* e = r->element[i];
  if (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS) return {};
  return std::string(e->str, e->len);
}

std::uint64_t positive(std::int64_t v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

class RedisLeaseTable final : public LeaseTable {
 public:
  RedisLeaseTable(std::shared_ptr<redis::RedisLink> link, std::uint64_t ttl_ms, std::uint64_t max_leases)
      : link_(std::move(link)), ttl_ms_(ttl_ms), ttl_text_(std::to_string(ttl_ms)),
        max_text_(std::to_string(max_leases)) {}

  LeaseGrant acquire(const std::string& key, const std::string& holder) override {
    LeaseGrant g;
    const std::string token = random_token();
    const std::string lk = lease_key(key), ik = info_key(key);
    auto r = link_->command(
        {"EVAL", k_acquire, "4", lk, ik, k_live, k_counters, token, ttl_text_, holder, key, max_text_});
    if (!r) {
      g.error = failed("acquire", r.error());
      return g;
    }
    if (int_at(r->get(), 0) == 2) {
      g.table_full = true;
    } else if (int_at(r->get(), 0) == 1) {
      g.granted = true;
      g.token = token;
      g.ttl_ms = ttl_ms_;
    } else {
      g.remaining_ms = std::max<std::uint64_t>(positive(int_at(r->get(), 1)), 1);
    }
    return g;
  }

  LeaseRenewal renew(const std::string& key, const std::string& token) override {
    LeaseRenewal out;
    const std::string lk = lease_key(key), ik = info_key(key);
    auto r = link_->command({"EVAL", k_renew, "4", lk, ik, k_live, k_counters, token, ttl_text_, key});
    if (!r) {
      out.error = failed("renew", r.error());
      return out;
    }
    switch (int_at(r->get(), 0)) {
      case 1:
        out.outcome = LeaseOutcome::ok;
        out.ttl_ms = ttl_ms_;
        break;
      case 2:
        out.outcome = LeaseOutcome::not_holder;
        out.remaining_ms = positive(int_at(r->get(), 1));
        break;
      default: out.outcome = LeaseOutcome::no_lease;
    }
    return out;
  }

  LeaseOutcome release(const std::string& key, const std::string& token) override {
    const std::string lk = lease_key(key), ik = info_key(key);
    auto r = link_->command({"EVAL", k_release, "4", lk, ik, k_live, k_counters, token, key});
    if (!r) {
      failed("release", r.error());
      return LeaseOutcome::unavailable;
    }
    const redisReply* rep = r->get();
    const long long v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    if (v == 1) return LeaseOutcome::ok;
    if (v == 2) return LeaseOutcome::not_holder;
    return LeaseOutcome::no_lease;
  }

  std::optional<Clock::time_point> live_until(const std::string& key) override {
    const std::string lk = lease_key(key);
    auto r = link_->command({"PTTL", lk});
    if (!r) {
      failed("pttl", r.error());
      return std::nullopt;
    }
    const redisReply* rep = r->get();
    if (rep->type != REDIS_REPLY_INTEGER || rep->integer <= 0) return std::nullopt;
    return Clock::now() + std::chrono::milliseconds(rep->integer);
  }

  std::vector<LeaseInfo> list() override {
    std::vector<LeaseInfo> out;
    sweep();
    auto members = link_->command({"ZRANGE", k_live, "0", "9999"});
    if (!members) {
      failed("list", members.error());
      return out;
    }
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < (*members)->elements; ++i) keys.push_back(str_at(members->get(), i));
    if (keys.empty()) return out;
    std::vector<std::string> lks, iks;
    for (const auto& k : keys) {
      lks.push_back(lease_key(k));
      iks.push_back(info_key(k));
    }
    std::vector<redis::Args> cmds;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      cmds.push_back({"PTTL", lks[i]});
      cmds.push_back({"HMGET", iks[i], "holder", "acquired", "renewals"});
    }
    auto replies = link_->pipeline(cmds);
    if (!replies) {
      failed("list", replies.error());
      return out;
    }
    const std::int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const redisReply* pttl = (*replies)[2 * i].get();
      if (pttl->type != REDIS_REPLY_INTEGER || pttl->integer <= 0) continue;
      const redisReply* info = (*replies)[2 * i + 1].get();
      LeaseInfo l;
      l.key = keys[i];
      l.holder = str_at(info, 0);
      l.acquired_unix_ms = int_at(info, 1);
      l.age_ms = positive(now_ms - l.acquired_unix_ms);
      l.remaining_ms = positive(pttl->integer);
      l.renewals = positive(int_at(info, 2));
      out.push_back(std::move(l));
    }
    std::sort(out.begin(), out.end(), [](const LeaseInfo& a, const LeaseInfo& b) { return a.key < b.key; });
    return out;
  }

  void sweep() override {
    auto r = link_->command({"EVAL", k_sweep, "2", k_live, k_counters});
    if (!r) failed("sweep", r.error());
  }

  LeaseCounters counters() override {
    LeaseCounters c;
    auto r = link_->pipeline({{"EVAL", k_sweep, "2", k_live, k_counters},
                              {"HMGET", k_counters, "granted", "renewed", "released", "expired"}});
    if (!r) {
      failed("counters", r.error());
      return c;
    }
    const redisReply* active = (*r)[0].get();
    c.active = active->type == REDIS_REPLY_INTEGER ? positive(active->integer) : 0;
    const redisReply* h = (*r)[1].get();
    c.granted = positive(int_at(h, 0));
    c.renewed = positive(int_at(h, 1));
    c.released = positive(int_at(h, 2));
    c.expired = positive(int_at(h, 3));
    return c;
  }

  std::uint64_t ttl_ms() const override { return ttl_ms_; }

 private:
  static Error failed(const char* op, const Error& e) {
    spdlog::warn("redis lease {} failed: {}: {}", op, errc_name(e.code), e.message);
    return make_error(e.code, std::string("lease table (redis) ") + op + ": " + e.message);
  }

  std::shared_ptr<redis::RedisLink> link_;
  const std::uint64_t ttl_ms_;
  const std::string ttl_text_;
  const std::string max_text_;  // --max-leases, for the acquire script
};

}  // namespace

Result<RedisReplicaParts> make_redis_replica_parts(const std::string& storage_uri, std::uint64_t ttl_ms,
                                                   std::uint64_t max_leases,
                                                   Waiters& waiters) {
  // The lease keys share the hash tag {leases}: in a Cluster every script
  // runs on the one master that serves that slot.
  std::shared_ptr<redis::RedisLink> link;
  redis::ConnectOptions node;
  if (storage_uri.rfind("redis-cluster://", 0) == 0) {
    // The storage backend has already accepted the URL's own parameters.
    auto url = redis::parse_cluster_url(storage_uri);
    if (!url) return url.error();
    auto* opts = &url->cluster;
    opts->node.pool_size = std::min<std::size_t>(opts->node.pool_size, 8);
    auto cluster = std::make_shared<redis::RedisCluster>(*opts);
    if (auto s = cluster->start(); !s) return make_error(s.error().code, "lease table: " + s.error().message);
    link = std::move(cluster);
    node = opts->node;
  } else {
    auto url = redis::parse_url(storage_uri);
    if (!url) return url.error();
    auto* opts = &url->conn;
    opts->pool_size = std::min<std::size_t>(opts->pool_size, 8);
    link = redis::make_single_link(*opts);
    node = *opts;
  }
  auto ping = link->command({"PING"});
  if (!ping) return make_error(ping.error().code, "lease table: " + ping.error().message);
  RedisReplicaParts parts;
  parts.leases = std::make_unique<RedisLeaseTable>(link, ttl_ms, max_leases);
  parts.landings = make_redis_landings(link, node, waiters);
  return parts;
}

}  // namespace kcache::server
