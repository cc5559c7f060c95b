// zstd compression of one section, and decompression bounded by the
// section's declared size.
//
// Internal to artifact/. decompress_section() never produces more than
// `declared_size` bytes, grows its output only as real bytes arrive (a lying
// declared size costs nothing up front), and refuses windows over
// k_max_window_log. Errors: too_large when the frames would decode past the
// declared size (a zstd bomb), corrupt for undecodable, short or incomplete
// frames.
// Thread safety: reentrant; each call owns its zstd context.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.hpp"

namespace kcache::artifact::detail {

Result<std::vector<std::uint8_t>> compress_section(std::span<const std::uint8_t> data, int level);

Result<std::vector<std::uint8_t>> decompress_section(std::span<const std::uint8_t> compressed,
                                                     std::uint64_t declared_size);

}  // namespace kcache::artifact::detail
