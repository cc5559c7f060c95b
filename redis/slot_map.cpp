// CLUSTER SLOTS and redirect parsing (redis/slot_map.hpp).
#include "redis/slot_map.hpp"

#include <algorithm>
#include <charconv>

namespace kcache::redis {
namespace {

Error bad(const std::string& why) {
  return make_error(Errc::internal, "redis cluster: bad CLUSTER SLOTS reply: " + why);
}

// [host, port, id, ...] -> endpoint; nullopt for an unknown host ("?").
std::optional<Endpoint> node_of(const redisReply* n, const Endpoint& asked) {
  if (n->type != REDIS_REPLY_ARRAY || n->elements < 2) return std::nullopt;
  const redisReply* h = n->element[0];
  const redisReply* p = n->element[1];
  if (h->type != REDIS_REPLY_STRING || p->type != REDIS_REPLY_INTEGER) return std::nullopt;
  std::string host(h->str, h->len);
  if (host == "?") return std::nullopt;
  if (host.empty()) host = asked.host;
  return Endpoint{host, static_cast<int>(p->integer)};
}

std::size_t index_of(std::vector<Endpoint>& list, const Endpoint& e) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].host == e.host && list[i].port == e.port) return i;
  }
  list.push_back(e);
  return list.size() - 1;
}

}  // namespace

std::size_t SlotMap::served_slots() const {
  return static_cast<std::size_t>(std::count_if(owner.begin(), owner.end(), [](std::int16_t o) { return o >= 0; }));
}

Result<SlotMap> parse_cluster_slots(const redisReply* reply, const Endpoint& asked) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return bad("not an array");
  SlotMap map;
  map.owner.fill(-1);
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) return bad("a range is not [start, end, master ...]");
    const redisReply* lo = range->element[0];
    const redisReply* hi = range->element[1];
    if (lo->type != REDIS_REPLY_INTEGER || hi->type != REDIS_REPLY_INTEGER || lo->integer < 0 ||
        hi->integer >= k_slot_count || lo->integer > hi->integer) {
      return bad("slot range out of bounds");
    }
    auto master = node_of(range->element[2], asked);
    if (!master) continue;  // a master whose address is not known yet: its slots stay unserved
    auto m = static_cast<std::int16_t>(index_of(map.masters, *master));
    for (long long s = lo->integer; s <= hi->integer; ++s) map.owner[static_cast<std::size_t>(s)] = m;
    for (std::size_t r = 3; r < range->elements; ++r) {
      if (auto rep = node_of(range->element[r], asked)) index_of(map.replicas, *rep);
    }
  }
  return map;
}

std::optional<Endpoint> redirect_target(std::string_view message, std::string_view kind) {
  // <kind> <slot> <host>:<port>
  if (message.size() <= kind.size() || message.substr(0, kind.size()) != kind || message[kind.size()] != ' ') {
    return std::nullopt;
  }
  auto rest = message.substr(kind.size() + 1);
  auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto addr = rest.substr(space + 1);
  auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;  // an empty host: the node that answered
  int port = 0;
  auto ps = addr.substr(colon + 1);
  auto [p, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), port);
  if (ec != std::errc{} || p != ps.data() + ps.size() || port <= 0 || port > 65535) return std::nullopt;
  return Endpoint{std::string(addr.substr(0, colon)), port};
}

}  // namespace kcache::redis
