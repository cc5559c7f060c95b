// How RESP keys live in kcache's storage (docs/protocol.md "RESP").
//
// A RESP key is any byte string ("pt2:fx-graph-v1::<hash>:c1"); storage
// names objects by 64 hex characters. A RESP key is stored under
// SHA-256("kcache-resp-v1\0" + key) — its own namespace, never equal to an
// artifact key by construction — with the RESP key itself as the entry's
// label (so `kcache ls --mode resp` lists them), mode "resp" and the key's
// cache type as its target. Values are opaque bytes, stored behind an
// 8-byte envelope ("KCRESP1\n") so that /v1/verify tells them from
// malformed bundles (storage's own checksum covers their bytes).
//
// Expiries (SET … EX/PX) are kept in memory by this server only: after a
// restart an entry stays until evicted. PyTorch's and Triton's remote
// caches set none.
// Thread safety: Expiries may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/backend.hpp"

namespace kcache::server::resp {

std::string storage_key(std::string_view resp_key);

// The cache family of a key, from a fixed set (a metric label): PyTorch's
// "pt2:fx-graph-v1", "pt2:autograd-experimental", "pt2:bundled-autotune-v1",
// "pt2:dynamo-pgo", "pt2:autotune" (pt2:<64 hex>), "pt2:other"; "triton";
// "other".
std::string cache_type(std::string_view resp_key);

storage::EntryMeta entry_meta(std::string_view resp_key);

std::vector<std::uint8_t> wrap_value(std::string_view value);
// The value inside a stored object; nullopt when it has no envelope.
std::optional<std::string_view> unwrap_value(const std::vector<std::uint8_t>& stored);

// At most `limit` keys with an expiry: has_room() says whether one more
// fits (SET refuses an expiry past it, storing nothing), and the server
// removes expired keys every second (due()), so keys set with an expiry
// and never read again do not stay in memory.
class Expiries {
 public:
  using Clock = std::chrono::system_clock;
  void set_limit(std::size_t limit);
  // Whether skey may get an expiry: it has one already, or there is room.
  bool has_room(const std::string& skey) const;
  void set(const std::string& skey, Clock::time_point when);
  void clear(const std::string& skey);
  // True when skey has an expiry, passed or not.
  bool has(const std::string& skey) const;
  // True when skey has an expiry that has passed (the caller removes it).
  bool expired(const std::string& skey) const;
  // Up to `max` keys whose expiry has passed (the caller removes them).
  std::vector<std::string> due(std::size_t max) const;
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::size_t limit_ = 1'000'000;                          // GUARDED_BY(mu_)
  std::unordered_map<std::string, Clock::time_point> at_;  // GUARDED_BY(mu_)
};

}  // namespace kcache::server::resp
