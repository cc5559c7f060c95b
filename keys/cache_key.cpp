#include "keys/cache_key.hpp"

#include "common/hex.hpp"

namespace kcache::keys {

namespace {

constexpr std::string_view k_domain = "kcache.cachekey\n";

void put_le(Sha256& h, std::uint64_t v, int bytes) {
  std::uint8_t buf[8];
  for (int i = 0; i < bytes; ++i) buf[i] = static_cast<std::uint8_t>(v >> (8 * i));
  h.update(std::span<const std::uint8_t>(buf, static_cast<std::size_t>(bytes)));
}

void hash_field(Sha256& h, Field f, std::string_view value) {
  const std::uint8_t tag = static_cast<std::uint8_t>(f);
  h.update(std::span<const std::uint8_t>(&tag, 1));
  std::string_view name = field_name(f);
  put_le(h, name.size(), 4);
  h.update(name);
  put_le(h, value.size(), 8);
  h.update(value);
}

}  // namespace

const char* field_name(Field f) noexcept {
  switch (f) {
    case Field::schema: return "schema";
    case Field::region: return "region";
    case Field::dtype: return "dtype";
    case Field::target: return "target";
    case Field::mode: return "mode";
    case Field::toolchain: return "toolchain";
    case Field::env: return "env";
  }
  return "unknown";
}

const std::string& KeyFields::get(Field f) const {
  return const_cast<KeyFields*>(this)->get(f);
}

std::string& KeyFields::get(Field f) {
  switch (f) {
    case Field::schema: return schema;
    case Field::region: return region;
    case Field::dtype: return dtype;
    case Field::target: return target;
    case Field::mode: return mode;
    case Field::toolchain: return toolchain;
    case Field::env: return env;
  }
  return schema;  // unreachable: every enumerator is handled above
}

bool is_key_hex(std::string_view text) noexcept {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<CacheKey> CacheKey::parse(std::string_view hex) {
  if (!is_key_hex(hex)) {
    return make_error(Errc::invalid_argument,
                      "a cache key is exactly 64 lowercase hex characters");
  }
  auto bytes = from_hex(hex);
  Digest d{};
  std::copy(bytes->begin(), bytes->end(), d.begin());
  return CacheKey(d);
}

std::string CacheKey::hex() const { return to_hex(digest_); }

Result<CacheKey> compute_key(const KeyFields& fields) {
  for (Field f : k_all_fields) {
    if (fields.get(f).empty()) {
      return make_error(Errc::invalid_argument,
                        std::string("cache key field '") + field_name(f) + "' is empty");
    }
  }
  Sha256 h;
  h.update(k_domain);
  for (Field f : k_all_fields) hash_field(h, f, fields.get(f));
  return CacheKey(h.finish());
}

std::string field_hash_hex(Field f, std::string_view value) {
  Sha256 h;
  h.update(k_domain);
  hash_field(h, f, value);
  return to_hex(h.finish());
}

Status validate_label(std::string_view label) {
  if (label.empty() || label.size() > 200) {
    return make_error(Errc::invalid_argument, "a label has 1 to 200 characters");
  }
  for (char c : label) {
    if (c <= ' ' || c > '~') {
      return make_error(Errc::invalid_argument,
                        "a label is printable ASCII without spaces");
    }
  }
  return Ok{};
}

}  // namespace kcache::keys
