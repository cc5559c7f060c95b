#include "server/resp/resp_hot.hpp"

#include <memory>

#include <boost/asio/post.hpp>

#include "server/resp/resp_command_support.hpp"

namespace kcache::server::resp {

HotTier::Bytes hot_value(RespShared& sh, const std::string& skey) {
  auto& s = sh.s;
  auto hot = s.hot.get(skey);
  if (!hot) return nullptr;
  s.metrics.hot_hits_resp.fetch_add(1, std::memory_order_relaxed);
  if (s.hot.needs_touch(skey)) {
    boost::asio::post(s.pool, [&sh, skey] {
      auto r = lookup(sh, skey);  // refills the tier, or:
      if (!r && (r.error().code == Errc::not_found || r.error().code == Errc::corrupt)) forget(sh, skey);
    });
  }
  return hot;
}

void remember(RespShared& sh, const std::string& skey, const std::vector<std::uint8_t>& stored,
              std::uint64_t since) {
  if (!sh.s.hot.enabled() || sh.expiries.has(skey)) return;
  sh.s.hot.put(skey, std::make_shared<const std::vector<std::uint8_t>>(stored), since);
}

void forget(RespShared& sh, const std::string& skey) { sh.s.hot.erase(skey); }

}  // namespace kcache::server::resp
