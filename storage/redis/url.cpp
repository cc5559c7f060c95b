// parse_redis_url() and parse_redis_cluster_url(): see
// storage/redis/backend.hpp. The library reads the connection
// (redis/url.hpp); the backend's own query parameters are read here.
#include "redis/url.hpp"

#include "storage/redis/backend.hpp"

namespace kcache::storage {
namespace {

Error bad(const char* scheme, const std::string& why) {
  return make_error(Errc::invalid_argument, std::string(scheme) + " URL: " + why);
}

Status apply(const char* scheme, const redis::QueryParams& extra, RedisOptions& o) {
  for (const auto& [name, v] : extra) {
    if (name == "wait_replicas" && v <= 16) o.wait_replicas = static_cast<int>(v);
    else if (name == "wait_timeout_ms" && v >= 1) o.wait_timeout = std::chrono::milliseconds(v);
    else if (name == "wait_replicas") return bad(scheme, "wait_replicas must be 0..16");
    else if (name == "wait_timeout_ms") return bad(scheme, "bad query parameter");
    else return bad(scheme, "unknown query parameter " + name);
  }
  // WAIT blocks the connection: its reply must come before the operation
  // timeout, or the connection would be dropped as hung.
  if (o.wait_replicas > 0 && o.wait_timeout >= o.op_timeout) return bad(scheme, "wait_timeout_ms must be below timeout_ms");
  return Ok{};
}

}  // namespace

Result<RedisOptions> parse_redis_url(const std::string& url) {
  auto u = redis::parse_url(url);
  if (!u) return u.error();
  RedisOptions o;
  static_cast<redis::ConnectOptions&>(o) = u->conn;
  if (auto s = apply("redis", u->extra, o); !s) return s.error();
  return o;
}

Result<RedisClusterOptions> parse_redis_cluster_url(const std::string& url) {
  auto u = redis::parse_cluster_url(url);
  if (!u) return u.error();
  RedisClusterOptions o;
  static_cast<redis::ConnectOptions&>(o.node) = u->cluster.node;
  o.seeds = u->cluster.seeds;
  o.max_attempts = u->cluster.max_attempts;
  if (auto s = apply("redis-cluster", u->extra, o.node); !s) return s.error();
  return o;
}

}  // namespace kcache::storage
