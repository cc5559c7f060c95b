// The cubin listing bundles carry and its check against the running target,
// with real nvcc cubins (tests/cpp/data/make_cubins.sh).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "artifact/cubin_listing.hpp"

namespace kcache::artifact {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes load(const std::string& name) {
  std::ifstream in(std::string(KCACHE_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

std::vector<Section> sections_with(const std::string& cubin) {
  return {{"torch/mega_cache", Bytes{'n', 'o', 't', ' ', 'e', 'l', 'f'}},
          {"inductor/x/k.cubin", load(cubin)},
          {"inductor/x/lib.so", Bytes{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      3, 0, 62, 0}}};  // an x86-64 ELF: not a cubin
}

TEST(CubinListing, ListsOnlyCudaElfSectionsWithTheirArch) {
  auto listed = list_cubins(sections_with("k_sm80.cubin"));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "inductor/x/k.cubin");
  EXPECT_EQ(listed[0].sm, 80);
  EXPECT_EQ(cubins_json(listed).dump(), R"([{"arch":"sm_80","name":"inductor/x/k.cubin"}])");
}

TEST(CubinListing, ManifestListIsCheckedAgainstACudaTarget) {
  nlohmann::json m = {{"key", std::string(64, 'a')},
                      {"cubins", cubins_json(list_cubins(sections_with("k_sm80.cubin")))}};
  EXPECT_TRUE(check_cubins_for_target(m, {}, "cuda:sm_80").ok());
  EXPECT_TRUE(check_cubins_for_target(m, {}, "cuda:sm_80a").ok());
  auto refused = check_cubins_for_target(m, {}, "cuda:sm_90");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::key_mismatch);
  EXPECT_EQ(refused.error().message,
            "bundle carries cubin inductor/x/k.cubin for sm_80; this device is sm_90");
  // A CPU target or no target checks nothing.
  EXPECT_TRUE(check_cubins_for_target(m, {}, "").ok());
  EXPECT_TRUE(check_cubins_for_target(m, {}, R"({"device":"cpu"})").ok());
}

TEST(CubinListing, SectionsAreCheckedEvenWhenTheManifestOmitsThem) {
  nlohmann::json m = {{"key", std::string(64, 'a')}};
  auto s90 = sections_with("k_sm90.cubin");
  EXPECT_TRUE(check_cubins_for_target(m, s90, "cuda:sm_90").ok());
  EXPECT_EQ(check_cubins_for_target(m, s90, "cuda:sm_80").error().code, Errc::key_mismatch);
}

TEST(CubinListing, UnreadableOrMalformedEntriesAreRefused) {
  Bytes cubin = load("k_sm90.cubin");
  cubin[4] = 1;  // ELFCLASS32: still EM_CUDA, arch unreadable
  std::vector<Section> s = {{"k.cubin", cubin}};
  auto listed = list_cubins(s);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].sm, 0);
  EXPECT_EQ(check_cubins_for_target(nlohmann::json::object(), s, "cuda:sm_90").error().message,
            "bundle carries cubin k.cubin for unknown; this device is sm_90");
  for (auto bad : {nlohmann::json("x"), nlohmann::json::array({1}),
                   nlohmann::json::array({{{"name", "k"}}})}) {
    nlohmann::json m = {{"cubins", bad}};
    EXPECT_EQ(check_cubins_for_target(m, {}, "cuda:sm_90").error().code, Errc::corrupt) << bad;
  }
  nlohmann::json unknown_arch = {{"cubins", {{{"name", "k"}, {"arch", "gfx90a"}}}}};
  EXPECT_EQ(check_cubins_for_target(unknown_arch, {}, "cuda:sm_90").error().code,
            Errc::key_mismatch);
}

}  // namespace
}  // namespace kcache::artifact
