// parse_cluster_url(): see redis/url.hpp. The credentials, path and query
// follow redis://'s rules (parse_url does them); only
// the comma-separated seed list is new.
#include <string_view>

#include "redis/url.hpp"

namespace kcache::redis {
namespace {

Error bad(const std::string& why) { return make_error(Errc::invalid_argument, "redis-cluster URL: " + why); }

}  // namespace

Result<ClusterUrl> parse_cluster_url(const std::string& url) {
  constexpr std::string_view k_scheme = "redis-cluster://";
  if (url.rfind(k_scheme, 0) != 0) return bad("must start with redis-cluster://");
  std::string_view rest = std::string_view(url).substr(k_scheme.size());
  // [cred@]hosts[/path][?query]: the hosts end at the first '/' or '?' after the credentials.
  std::string_view cred;
  std::string_view hosts = rest;
  std::string_view tail;
  auto end_of_authority = rest.find_first_of("/?");
  auto at = rest.substr(0, end_of_authority).rfind('@');
  if (at != std::string_view::npos) {
    cred = rest.substr(0, at + 1);
    hosts = rest.substr(at + 1);
  }
  if (auto cut = hosts.find_first_of("/?"); cut != std::string_view::npos) {
    tail = hosts.substr(cut);
    hosts = hosts.substr(0, cut);
  }
  if (hosts.empty()) return bad("missing host:port list");
  ClusterUrl o;
  while (!hosts.empty()) {
    auto comma = hosts.find(',');
    std::string_view one = hosts.substr(0, comma);
    hosts = comma == std::string_view::npos ? std::string_view{} : hosts.substr(comma + 1);
    if (one.empty()) return bad("empty host in the list");
    // Each seed through the redis:// parser, so host and port follow its rules.
    auto seed = parse_url("redis://" + std::string(cred) + std::string(one) + std::string(tail));
    if (!seed) return bad(seed.error().message);
    if (seed->conn.db != 0) return bad("a Redis Cluster has only database 0");
    if (o.cluster.seeds.empty()) {
      o.cluster.node = seed->conn;
      o.extra = seed->extra;
    }
    o.cluster.seeds.emplace_back(seed->conn.host, seed->conn.port);
  }
  return o;
}

}  // namespace kcache::redis
