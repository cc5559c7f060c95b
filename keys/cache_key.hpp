// CacheKey: the name of one compiled region in the cache.
//
// A key is SHA-256 over a fixed sequence of tagged, length-prefixed fields
// (docs/keys.md). Each field is hashed as
//   u8 field tag | u32le len(name) | name | u64le len(value) | value
// after a domain prefix, so no two field lists can hash alike even when
// their concatenations are equal ("ab"+"c" vs "a"+"bc"). The fields' values
// are produced by the Python side (compile/kcache/keyfields.py) as
// canonical bytes; this layer never interprets them.
//
// Thread safety: value types; all functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "common/sha256.hpp"

namespace kcache::keys {

// The key schema version. Bump it when the meaning of any field changes:
// every existing key then misses, which is the safe direction.
inline constexpr std::string_view k_schema_version = "kcache-key-v1";

enum class Field : std::uint8_t {
  schema = 1,
  region = 2,
  dtype = 3,
  target = 4,
  mode = 5,
  toolchain = 6,
  env = 7,
};

inline constexpr std::array<Field, 7> k_all_fields = {
    Field::schema, Field::region,    Field::dtype, Field::target,
    Field::mode,   Field::toolchain, Field::env};

const char* field_name(Field f) noexcept;

// The inputs of one key. `schema` defaults to this build's version; the
// others must be non-empty (an empty field is almost always a bug upstream
// that would merge unrelated entries).
struct KeyFields {
  std::string schema{k_schema_version};
  std::string region;     // canonical graph bytes
  std::string dtype;      // compute dtype and autocast policy
  std::string target;     // "cpu:avx512:..." or "cuda:sm_90"
  std::string mode;       // backend, mode, options, train/infer, config hashes
  std::string toolchain;  // torch / triton / compiler / artifact schema
  std::string env;        // declared key-relevant environment, canonical

  const std::string& get(Field f) const;
  std::string& get(Field f);
};

class CacheKey {
 public:
  CacheKey() = default;
  explicit CacheKey(const Digest& d) : digest_(d) {}

  // Parses exactly 64 lowercase hex characters; anything else is
  // Errc::invalid_argument.
  static Result<CacheKey> parse(std::string_view hex);

  std::string hex() const;
  const Digest& digest() const { return digest_; }
  friend bool operator==(const CacheKey&, const CacheKey&) = default;

 private:
  Digest digest_{};
};

// True if `text` is exactly 64 lowercase hex characters.
bool is_key_hex(std::string_view text) noexcept;

// Errc::invalid_argument if a required field is empty.
Result<CacheKey> compute_key(const KeyFields& fields);

// The sub-hash of one field: SHA-256 over the same tagged encoding of that
// field alone. It lets two explanations be compared field by field.
std::string field_hash_hex(Field f, std::string_view value);

// Validates a readable label ("GPT2Block/cpu:avx512/f32/default/train"):
// 1..200 printable ASCII characters, no spaces or control characters.
Status validate_label(std::string_view label);

}  // namespace kcache::keys
