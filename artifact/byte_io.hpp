// Little-endian fixed-width integers and a bounds-checked read cursor.
//
// Internal to artifact/. ByteCursor never reads past its span: every take_*
// returns nullopt instead, so parsers turn "input ended" into an Error value
// without ever computing an out-of-range pointer.
// Thread safety: plain value types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kcache::artifact::detail {

inline void put_u16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// REQUIRES: p points at N readable bytes.
template <typename T, std::size_t N = sizeof(T)>
T load_le(const std::uint8_t* p) {
  T v = 0;
  for (std::size_t i = 0; i < N; ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

class ByteCursor {
 public:
  explicit ByteCursor(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  std::size_t remaining() const { return bytes_.size() - pos_; }
  std::size_t position() const { return pos_; }

  std::optional<std::span<const std::uint8_t>> take(std::uint64_t n) {
    if (n > remaining()) return std::nullopt;
    auto out = bytes_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }
  template <typename T>
  std::optional<T> take_le() {
    auto b = take(sizeof(T));
    if (!b) return std::nullopt;
    return load_le<T>(b->data());
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
};

}  // namespace kcache::artifact::detail
