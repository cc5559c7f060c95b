// Bounded zstd streaming: output is appended chunk by chunk and each chunk is
// checked against the declared size before it is kept, so a bomb is stopped
// after at most one extra chunk of work.
#include "artifact/section_codec.hpp"

#include <zstd.h>
#include <zstd_errors.h>

#include <memory>
#include <string>

#include "artifact/bundle_format.hpp"

namespace kcache::artifact::detail {
namespace {

using DctxPtr = std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)>;
using CctxPtr = std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)>;

Error zstd_error(std::size_t code) {
  if (ZSTD_getErrorCode(code) == ZSTD_error_frameParameter_windowTooLarge) {
    return make_error(Errc::too_large, "zstd window larger than 2^" +
                                           std::to_string(k_max_window_log) + " bytes");
  }
  return make_error(Errc::corrupt, std::string("zstd: ") + ZSTD_getErrorName(code));
}

}  // namespace

Result<std::vector<std::uint8_t>> compress_section(std::span<const std::uint8_t> data, int level) {
  CctxPtr cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  if (!cctx) return make_error(Errc::internal, "ZSTD_createCCtx failed");
  std::vector<std::uint8_t> out(ZSTD_compressBound(data.size()));
  std::size_t n = ZSTD_compressCCtx(cctx.get(), out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) {
    return make_error(Errc::internal, std::string("zstd compress: ") + ZSTD_getErrorName(n));
  }
  out.resize(n);
  return out;
}

Result<std::vector<std::uint8_t>> decompress_section(std::span<const std::uint8_t> compressed,
                                                     std::uint64_t declared_size) {
  std::vector<std::uint8_t> out;
  if (compressed.empty()) {
    if (declared_size == 0) return out;
    return make_error(Errc::corrupt, "section has no compressed bytes but a non-zero size");
  }
  DctxPtr dctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  if (!dctx) return make_error(Errc::internal, "ZSTD_createDCtx failed");
  std::size_t rc = ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, k_max_window_log);
  if (ZSTD_isError(rc)) return make_error(Errc::internal, "cannot limit the zstd window");

  std::vector<std::uint8_t> chunk(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  std::size_t frame_state = 1;  // 0 once the last frame is complete
  for (;;) {
    ZSTD_outBuffer o{chunk.data(), chunk.size(), 0};
    std::size_t in_before = in.pos;
    frame_state = ZSTD_decompressStream(dctx.get(), &o, &in);
    if (ZSTD_isError(frame_state)) return zstd_error(frame_state);
    if (o.pos > declared_size - out.size()) {
      return make_error(Errc::too_large, "section decompresses past its declared " +
                                             std::to_string(declared_size) + " bytes");
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(o.pos));
    // 0 means the current frame is decoded and fully flushed.
    if (frame_state == 0 && in.pos == in.size) break;
    if (in.pos == in.size && o.pos < o.size) break;  // input ends inside a frame
    if (o.pos == 0 && in.pos == in_before) {
      return make_error(Errc::corrupt, "zstd made no progress");
    }
  }
  if (frame_state != 0) return make_error(Errc::corrupt, "section ends inside a zstd frame");
  if (out.size() != declared_size) {
    return make_error(Errc::corrupt, "section decompresses to " + std::to_string(out.size()) +
                                         " bytes, declared " + std::to_string(declared_size));
  }
  return out;
}

}  // namespace kcache::artifact::detail
