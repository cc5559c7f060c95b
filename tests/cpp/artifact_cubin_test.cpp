// Cubin arch check against real nvcc output (tests/cpp/data/make_cubins.sh)
// and against non-ELF, truncated and non-CUDA inputs.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "artifact/cubin.hpp"
#include "artifact_test_util.hpp"

namespace kcache::artifact {
namespace {

using test_util::Bytes;
using test_util::patch_le;

Bytes load(const std::string& name) {
  std::ifstream in(std::string(KCACHE_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

TEST(ArtifactCubin, ReadsTheSmOfRealCubins) {
  auto sm80 = read_cubin_arch(load("k_sm80.cubin"));
  ASSERT_TRUE(sm80.ok()) << sm80.error().message;
  EXPECT_EQ(sm80->sm, 80);
  auto sm90 = read_cubin_arch(load("k_sm90.cubin"));
  ASSERT_TRUE(sm90.ok()) << sm90.error().message;
  EXPECT_EQ(sm90->sm, 90);
  EXPECT_EQ(sm90->abi_version, 8);  // CUDA 13
  EXPECT_EQ(sm90->e_flags, 0x6005a04u);
}

TEST(ArtifactCubin, ChecksAgainstTheExpectedArch) {
  Bytes sm90 = load("k_sm90.cubin");
  EXPECT_TRUE(check_cubin_arch(sm90, "sm_90").ok());
  EXPECT_TRUE(check_cubin_arch(sm90, "sm_90a").ok());
  EXPECT_EQ(check_cubin_arch(sm90, "sm_80").error().code, Errc::key_mismatch);
  EXPECT_EQ(check_cubin_arch(load("k_sm80.cubin"), "sm_90").error().code, Errc::key_mismatch);
  for (const char* bad : {"", "sm_", "90", "gfx90a", "sm_9x", "sm_0", "sm_1000", "sm_90ab"}) {
    EXPECT_EQ(check_cubin_arch(sm90, bad).error().code, Errc::invalid_argument) << bad;
  }
  EXPECT_EQ(parse_sm_arch("sm_120").value(), 120);
}

TEST(ArtifactCubin, OlderAbiKeepsTheSmInTheLowByte) {
  Bytes old = load("k_sm80.cubin");
  old[8] = 7;                        // EI_ABIVERSION
  patch_le(old, 48, 0x00500550, 4);  // e_flags as CUDA 12 writes them for sm_80
  auto info = read_cubin_arch(old);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->sm, 80);
}

TEST(ArtifactCubin, RefusesWhatIsNotACudaCubin) {
  Bytes good = load("k_sm90.cubin");
  EXPECT_EQ(read_cubin_arch(Bytes{'h', 'e', 'l', 'l', 'o'}).error().code, Errc::bad_magic);
  EXPECT_EQ(read_cubin_arch(Bytes{}).error().code, Errc::truncated);
  for (std::size_t n : {1, 4, 10, 47, 63}) {
    Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(read_cubin_arch(cut).error().code, Errc::truncated) << n;
  }
  Bytes x86 = good;
  patch_le(x86, 18, 62, 2);  // EM_X86_64
  EXPECT_EQ(read_cubin_arch(x86).error().code, Errc::corrupt);
  Bytes elf32 = good;
  elf32[4] = 1;
  EXPECT_EQ(read_cubin_arch(elf32).error().code, Errc::corrupt);
  Bytes big_endian = good;
  big_endian[5] = 2;
  EXPECT_EQ(read_cubin_arch(big_endian).error().code, Errc::corrupt);
  Bytes no_sm = good;
  patch_le(no_sm, 48, 0x06000004, 4);
  EXPECT_EQ(read_cubin_arch(no_sm).error().code, Errc::corrupt);

  std::ifstream host("/proc/self/exe", std::ios::binary);
  Bytes self(std::istreambuf_iterator<char>(host), {});
  EXPECT_EQ(read_cubin_arch(self).error().code, Errc::corrupt);  // a host ELF
}

}  // namespace
}  // namespace kcache::artifact
