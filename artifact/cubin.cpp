// ELF64 header fields read at fixed offsets (System V gABI); nothing beyond
// the header is touched, so no section or program table is ever trusted.
#include "artifact/cubin.hpp"

#include <string>

#include "artifact/byte_io.hpp"

namespace kcache::artifact {
namespace {

constexpr std::size_t k_elf64_header_size = 64;
constexpr std::size_t k_ei_class = 4;
constexpr std::size_t k_ei_data = 5;
constexpr std::size_t k_ei_osabi = 7;
constexpr std::size_t k_ei_abiversion = 8;
constexpr std::size_t k_e_machine = 18;
constexpr std::size_t k_e_flags = 48;
constexpr std::size_t k_e_ehsize = 52;
// ABI version 8 (CUDA 13) moved the SM number from bits 0..7 to 8..15.
constexpr std::uint8_t k_first_abi_with_sm_in_bits_8_15 = 8;

}  // namespace

Result<CubinInfo> read_cubin_arch(std::span<const std::uint8_t> bytes) {
  static constexpr std::uint8_t k_elf_magic[4] = {0x7f, 'E', 'L', 'F'};
  for (std::size_t i = 0; i < 4 && i < bytes.size(); ++i) {
    if (bytes[i] != k_elf_magic[i]) return make_error(Errc::bad_magic, "not an ELF file");
  }
  if (bytes.size() < k_elf64_header_size) {
    return make_error(Errc::truncated, "cubin shorter than an ELF64 header");
  }
  if (bytes[k_ei_class] != 2) return make_error(Errc::corrupt, "cubin is not ELF64");
  if (bytes[k_ei_data] != 1) return make_error(Errc::corrupt, "cubin is not little-endian");
  auto machine = detail::load_le<std::uint16_t>(bytes.data() + k_e_machine);
  if (machine != k_em_cuda) {
    return make_error(Errc::corrupt, "ELF e_machine " + std::to_string(machine) + " is not EM_CUDA");
  }
  if (detail::load_le<std::uint16_t>(bytes.data() + k_e_ehsize) < k_elf64_header_size) {
    return make_error(Errc::corrupt, "ELF header size field is too small");
  }
  CubinInfo info;
  info.os_abi = bytes[k_ei_osabi];
  info.abi_version = bytes[k_ei_abiversion];
  info.e_flags = detail::load_le<std::uint32_t>(bytes.data() + k_e_flags);
  info.sm = info.abi_version >= k_first_abi_with_sm_in_bits_8_15
                ? static_cast<int>((info.e_flags >> 8) & 0xff)
                : static_cast<int>(info.e_flags & 0xff);
  if (info.sm == 0) return make_error(Errc::corrupt, "cubin e_flags name no SM");
  return info;
}

Result<int> parse_sm_arch(std::string_view arch) {
  if (!arch.starts_with("sm_")) {
    return make_error(Errc::invalid_argument, "arch must look like sm_90: '" + std::string(arch) + "'");
  }
  std::string_view digits = arch.substr(3);
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 3) {
    return make_error(Errc::invalid_argument, "bad SM number in '" + std::string(arch) + "'");
  }
  int sm = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return make_error(Errc::invalid_argument, "bad SM number in '" + std::string(arch) + "'");
    }
    sm = sm * 10 + (c - '0');
  }
  if (sm == 0 || sm > 255) return make_error(Errc::invalid_argument, "SM number out of range");
  return sm;
}

Result<CubinInfo> check_cubin_arch(std::span<const std::uint8_t> bytes, std::string_view expected) {
  auto want = parse_sm_arch(expected);
  if (!want) return want.error();
  auto info = read_cubin_arch(bytes);
  if (!info) return info.error();
  if (info->sm != *want) {
    return make_error(Errc::key_mismatch, "cubin is for sm_" + std::to_string(info->sm) +
                                              ", expected " + std::string(expected));
  }
  return info;
}

}  // namespace kcache::artifact
