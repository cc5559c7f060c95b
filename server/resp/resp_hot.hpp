// RESP values in the hot tier (server/hot_tier.hpp): a GET of a value read
// recently is answered on the connection's strand, with no hop to the
// blocking pool and back (what kept unpipelined GETs at ~0.45x of
// redis-server's rate, bench/resp/HOT_PATH.md).
//
// Contract:
//  - Filled by lookup() from successful storage reads only; never from SET.
//  - Only values without an expiry are kept, so a hot hit checks no clock.
//  - Every SET that stores and every DEL calls forget() after storage has
//    changed. RESP values can be replaced (SET of a present key), so a fill
//    carries the tier's generation from before its read and is dropped when
//    a forget() came in between (HotTier::put).
//  - Off with redis:// storage, as for HTTP (another replica's SET or DEL
//    could not reach this tier).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/resp/resp_commands.hpp"

namespace kcache::server::resp {

// The stored value (envelope included), or nullptr. A hit now and then
// reads the key through storage on the pool as well (the backend's LRU and
// hit count; a key the backend dropped leaves the tier).
HotTier::Bytes hot_value(RespShared& sh, const std::string& skey);
// After a successful storage read of skey that began at generation `since`.
void remember(RespShared& sh, const std::string& skey, const std::vector<std::uint8_t>& stored,
              std::uint64_t since);
// After skey's stored value changed or went.
void forget(RespShared& sh, const std::string& skey);

}  // namespace kcache::server::resp
