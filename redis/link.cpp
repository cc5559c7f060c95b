// The single-server RedisLink and the SCAN loop (redis/link.hpp).
#include "redis/link.hpp"

namespace kcache::redis {
namespace {

class SingleLink final : public RedisLink {
 public:
  explicit SingleLink(const ConnectOptions& opts) : pool_(opts), where_{opts.host, opts.port} {}

  Result<Reply> command(const Args& args) override {
    return pool_.run([&](RedisConn& c) { return c.command(args); });
  }

  Result<std::vector<Reply>> pipeline(const std::vector<Args>& cmds) override {
    return pool_.run([&](RedisConn& c) { return c.pipeline(cmds); });
  }

  Result<std::vector<std::string>> scan(std::string_view pattern) override {
    return pool_.run([&](RedisConn& c) { return scan_node(c, pattern); });
  }

  std::vector<Endpoint> endpoints() override { return {where_}; }

 private:
  RedisPool pool_;
  const Endpoint where_;
};

}  // namespace

std::shared_ptr<RedisLink> make_single_link(const ConnectOptions& opts) { return std::make_shared<SingleLink>(opts); }

Result<std::vector<std::string>> scan_node(RedisConn& conn, std::string_view pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    auto r = conn.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r) return r.error();
    const redisReply* top = r->get();
    if (top->type != REDIS_REPLY_ARRAY || top->elements != 2) {
      return make_error(Errc::internal, "redis: bad SCAN reply");
    }
    cursor.assign(top->element[0]->str, top->element[0]->len);
    const redisReply* names = top->element[1];
    for (std::size_t i = 0; i < names->elements; ++i) keys.emplace_back(names->element[i]->str, names->element[i]->len);
  } while (cursor != "0");
  return keys;
}

}  // namespace kcache::redis
