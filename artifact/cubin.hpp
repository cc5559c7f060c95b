// CUDA cubin architecture check: which SM a cubin's ELF header says it was
// built for, so a restored artifact is refused on the wrong GPU target.
//
// Contract: read_cubin_arch() reads only the 64-byte ELF64 header, with
// every offset bounds-checked. It requires ELFCLASS64, little-endian and
// e_machine EM_CUDA (190). The SM number comes from e_flags: bits 8..15 for
// ELF ABI version 8 and later (CUDA 13: sm_90 -> e_flags 0x06005a04), bits
// 0..7 for ABI version 7 and earlier. Errors: truncated (shorter than the
// header), bad_magic (not ELF), corrupt (ELF32, big-endian, not EM_CUDA, SM
// number 0, or a header size smaller than the ELF64 header).
// check_cubin_arch() additionally returns key_mismatch when the SM differs
// from `expected` ("sm_90"; an "a"/"f" suffix such as "sm_90a" is accepted
// and compares by number), invalid_argument when `expected` is malformed.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/result.hpp"

namespace kcache::artifact {

inline constexpr std::uint16_t k_em_cuda = 190;

struct CubinInfo {
  int sm = 0;                     // 80 for sm_80
  std::uint8_t abi_version = 0;   // e_ident[EI_ABIVERSION]
  std::uint8_t os_abi = 0;        // e_ident[EI_OSABI]
  std::uint32_t e_flags = 0;
};

Result<CubinInfo> read_cubin_arch(std::span<const std::uint8_t> bytes);

// Parses "sm_XX" (optionally suffixed "a" or "f") into XX.
Result<int> parse_sm_arch(std::string_view arch);

Result<CubinInfo> check_cubin_arch(std::span<const std::uint8_t> bytes, std::string_view expected);

}  // namespace kcache::artifact
