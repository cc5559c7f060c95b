// Constants of the bundle byte layout (format version 1, docs/artifact.md).
//
// Internal to artifact/: the writer and the reader share these so the two
// can never disagree about an offset. Changing any of them changes the
// on-disk format and needs a new k_format_version.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kcache::artifact::detail {

inline constexpr std::array<std::uint8_t, 8> k_magic = {'K', 'C', 'B', 'N', 'D', 'L', 0, 0};
inline constexpr std::uint32_t k_format_version = 1;

inline constexpr std::uint32_t k_flag_signed = 1u << 0;
inline constexpr std::uint32_t k_known_flags = k_flag_signed;

// magic(8) version(4) flags(4) total_length(8)
inline constexpr std::size_t k_header_size = 24;
inline constexpr std::size_t k_trailer_size = 32;
inline constexpr std::size_t k_key_id_size = 8;
inline constexpr std::size_t k_signature_size = 64;
inline constexpr std::size_t k_signature_block_size = k_key_id_size + k_signature_size;
// header + manifest_length(4) + section_count(4) + trailer
inline constexpr std::size_t k_min_unsigned_size = k_header_size + 4 + 4 + k_trailer_size;

inline constexpr std::size_t k_max_section_name = 255;
// Manifest nesting deeper than this is refused: nothing kcache writes is
// deeper than 3, and deep trees make every recursive consumer a stack risk.
inline constexpr int k_max_manifest_depth = 64;
// zstd window ceiling for readers (8 MiB); writers clamp the level to <= 19,
// whose window never exceeds it.
inline constexpr int k_max_window_log = 23;
inline constexpr int k_min_zstd_level = 1;
inline constexpr int k_max_zstd_level = 19;

// The signed message is this domain tag followed by the 32-byte trailer, so
// a bundle signature can never be replayed as some other kind of signature.
inline constexpr std::string_view k_signature_domain{"kcache-bundle-sig-v1\0", 21};

}  // namespace kcache::artifact::detail
