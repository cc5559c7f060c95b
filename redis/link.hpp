// RedisLink: where the redis backend and the server's replica coordination
// send their commands — one redis-server (a RedisPool) or a Redis Cluster
// (RedisCluster, redis/cluster.hpp, which routes each command by the
// hash slot of its first key).
//
// Contract shared by both:
// - command(): one command; an error reply is an Error (reply_error()).
// - pipeline(): replies in the order of `cmds`; the first error reply fails
//   the call. A MULTI ... EXEC block runs on one connection, so its keys must
//   share a hash tag. Order is kept among commands on the same node; commands
//   whose keys live on different nodes are independent of each other (a
//   single server still runs the whole pipeline in one round trip). A WAIT
//   runs on the connection of the command before it, so it counts the
//   replicas that acknowledged that command's writes.
// - scan(): every key matching a SCAN pattern, on every master.
// - endpoints(): the nodes a SUBSCRIBE may go to, preferred first (Cluster
//   PUBLISH reaches every node, replicas included).
// Errors: Errc::unavailable / timeout as RedisPool maps them.
// Thread safety: every method may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/pool.hpp"

namespace kcache::redis {

struct Endpoint {
  std::string host;
  int port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

class RedisLink {
 public:
  virtual ~RedisLink() = default;
  virtual Result<Reply> command(const Args& args) = 0;
  virtual Result<std::vector<Reply>> pipeline(const std::vector<Args>& cmds) = 0;
  virtual Result<std::vector<std::string>> scan(std::string_view pattern) = 0;
  virtual std::vector<Endpoint> endpoints() = 0;
};

// A link to the one server `opts` names, through a pool of opts.pool_size.
std::shared_ptr<RedisLink> make_single_link(const ConnectOptions& opts);

// SCAN cursor loop on one connection: every key matching `pattern`.
Result<std::vector<std::string>> scan_node(RedisConn& conn, std::string_view pattern);

}  // namespace kcache::redis
