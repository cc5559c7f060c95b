// Helpers for the artifact tests: an independent byte-level bundle assembler
// that follows docs/artifact.md (so tests can build hostile bundles with a
// correct trailer), little-endian patching and resealing.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/sha256.hpp"

namespace kcache::artifact::test_util {

using Bytes = std::vector<std::uint8_t>;

inline const std::string k_key_a(64, 'a');
inline const std::string k_key_b(64, 'b');

inline void put_le(Bytes& out, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void patch_le(Bytes& b, std::size_t at, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint64_t read_le(const Bytes& b, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= static_cast<std::uint64_t>(b.at(at + i)) << (8 * i);
  return v;
}

inline Bytes zstd(const Bytes& data, int level = 3) {
  Bytes out(ZSTD_compressBound(data.size()));
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level));
  return out;
}

struct RawSection {
  std::string name;
  std::uint64_t declared = 0;
  Bytes compressed;
  Digest sha{};
};

// A well-formed section of `data`.
inline RawSection raw_section(std::string name, const Bytes& data) {
  return RawSection{std::move(name), data.size(), zstd(data), sha256(std::span<const std::uint8_t>(data))};
}

// Recomputes total_length and the trailer of an unsigned bundle whose body
// (everything before the trailer) is b[0, size - 32).
inline void reseal(Bytes& b) {
  patch_le(b, 16, b.size(), 8);
  Digest d = sha256(std::span<const std::uint8_t>(b.data(), b.size() - 32));
  std::copy(d.begin(), d.end(), b.end() - 32);
}

// Assembles an unsigned bundle field by field, with a correct trailer.
inline Bytes assemble(const std::string& manifest, const std::vector<RawSection>& sections,
                      std::uint32_t version = 1, std::uint32_t flags = 0) {
  Bytes b = {'K', 'C', 'B', 'N', 'D', 'L', 0, 0};
  put_le(b, version, 4);
  put_le(b, flags, 4);
  put_le(b, 0, 8);
  put_le(b, manifest.size(), 4);
  b.insert(b.end(), manifest.begin(), manifest.end());
  put_le(b, sections.size(), 4);
  for (const RawSection& s : sections) {
    put_le(b, s.name.size(), 2);
    b.insert(b.end(), s.name.begin(), s.name.end());
    put_le(b, s.declared, 8);
    put_le(b, s.compressed.size(), 8);
    b.insert(b.end(), s.sha.begin(), s.sha.end());
    b.insert(b.end(), s.compressed.begin(), s.compressed.end());
  }
  b.resize(b.size() + 32);
  reseal(b);
  return b;
}

inline std::string manifest_for(const std::string& key) { return "{\"key\":\"" + key + "\"}"; }

}  // namespace kcache::artifact::test_util
