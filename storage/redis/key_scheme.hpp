// The names of a redis store's keys (storage/redis/backend.hpp "Key
// scheme"), every one derived from one prefix (RedisOptions::key_prefix,
// "kcache:" by default, "kcache:ns:<ns>:" for a namespace's store):
//   <prefix>{<hex>}:meta   :chunk:<N>   :tmp:<token>:<N>   :sync
//   <prefix>{index}:lru    :sizes       :usage             :keys
// A prefix holds no brace, so the hash tag ({<hex>}, {index}) is the first
// pair of braces of every name: a Cluster keeps an entry's keys in one slot,
// and the index's in one slot, whatever the prefix. A name's prefix is all
// of it before the first '{', so stores with different prefixes share no
// key, and the SCAN pattern <prefix>{*}:meta of one matches no meta key of
// another. The default prefix gives exactly the names kcache used before
// prefixes existed, so a store written then opens unchanged.
// Thread safety: immutable value.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"

namespace kcache::storage::redisdb {

inline constexpr std::string_view k_default_key_prefix = "kcache:";

// Errc::invalid_argument unless `prefix` is non-empty, ends with ':' and
// holds no '{', '}', '*', '?', '[' and no whitespace.
Status check_key_prefix(const std::string& prefix);

class KeyScheme {
 public:
  // REQUIRES: check_key_prefix(prefix) passed.
  explicit KeyScheme(std::string prefix = std::string(k_default_key_prefix));

  const std::string& prefix() const { return prefix_; }

  // An entry's keys: its meta hash, the prefix of its chunk keys (append
  // N), of a put's temp chunks (append N), and its durability marker.
  std::string meta(std::string_view hex) const { return entry(hex) + "meta"; }
  std::string chunk_prefix(std::string_view hex) const { return entry(hex) + "chunk:"; }
  std::string tmp_prefix(std::string_view hex, std::string_view token) const {
    return entry(hex) + "tmp:" + std::string(token) + ":";
  }
  std::string sync(std::string_view hex) const { return entry(hex) + "sync"; }

  // The index (storage/redis/index.hpp), in the order the index scripts
  // take them as KEYS.
  const std::string& lru() const { return lru_; }
  const std::string& sizes() const { return sizes_; }
  const std::string& usage() const { return usage_; }
  const std::string& keys() const { return keys_; }

  // The SCAN pattern of every meta key of this prefix (glob characters of
  // the prefix escaped).
  std::string meta_pattern() const;
  // The entry key of a meta key this scheme names, or "" for any other name.
  std::string hex_of_meta(std::string_view name) const;

 private:
  std::string entry(std::string_view hex) const { return prefix_ + "{" + std::string(hex) + "}:"; }

  std::string prefix_, lru_, sizes_, usage_, keys_;
};

}  // namespace kcache::storage::redisdb
