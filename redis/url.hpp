// Redis URLs, read one way for every user of the library:
//   redis://[user:pass@]host[:port][/db][?connect_timeout_ms=N&timeout_ms=N&pool=N]
//   redis-cluster://[user:pass@]host:port[,host:port...][/][?query]
// Credentials are %XX-decoded (a password may hold ':' '@' '/'). With no
// password in the URL, KCACHE_REDIS_PASSWORD_FILE names a file whose first
// line is the password. Query values are non-negative integers; the
// library's own (connect_timeout_ms, timeout_ms, pool) must be positive,
// and any other parameter is handed back in `extra`, in order, for the
// caller to accept or refuse (storage/redis/backend.hpp: wait_replicas,
// wait_timeout_ms). Errc::invalid_argument for a malformed URL, the
// message prefixed "redis URL: " or "redis-cluster URL: ", never holding
// the password.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "redis/options.hpp"

namespace kcache::redis {

using QueryParams = std::vector<std::pair<std::string, long>>;

struct Url {
  ConnectOptions conn;
  QueryParams extra;
};

struct ClusterUrl {
  ClusterOptions cluster;  // cluster.node from the first seed
  QueryParams extra;
};

Result<Url> parse_url(const std::string& url);
// A database other than 0 is refused (a Cluster has only 0).
Result<ClusterUrl> parse_cluster_url(const std::string& url);

}  // namespace kcache::redis
