// inspect_bundle_ranges (artifact/bundle_peek.cpp): the same summary as
// inspect_bundle from a bundle read a part at a time, the section data never
// read, and the same refusal of a cut or damaged structure.
#include <gtest/gtest.h>

#include <random>

#include "artifact/bundle.hpp"
#include "artifact_test_util.hpp"

namespace kcache::artifact {
namespace {

using namespace test_util;

struct Reader {
  const Bytes& bytes;
  std::uint64_t read = 0;  // bytes handed out
  RangeReader fn() {
    return [this](std::uint64_t off, std::uint64_t len) -> Result<Bytes> {
      if (off >= bytes.size()) return Bytes{};
      auto end = std::min<std::uint64_t>(bytes.size(), off + len);
      read += end - off;
      return Bytes(bytes.begin() + static_cast<std::ptrdiff_t>(off), bytes.begin() + static_cast<std::ptrdiff_t>(end));
    };
  }
};

Bytes noise(std::size_t n) {
  std::mt19937 rng(7);
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

TEST(ArtifactBundlePeek, SummarizesLikeInspectBundleReadingOnlyHeaders) {
  nlohmann::json m = {{"key", k_key_a}, {"label", "x"}};
  auto bytes = write_bundle(m, {{"big", noise(8 << 20)}, {"small", Bytes{1, 2, 3}}, {"empty", {}}});
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto whole = inspect_bundle(*bytes);
  ASSERT_TRUE(whole.ok());
  Reader r{*bytes};
  auto peek = inspect_bundle_ranges(bytes->size(), r.fn());
  ASSERT_TRUE(peek.ok()) << peek.error().message;
  EXPECT_EQ(peek->manifest, whole->manifest);
  EXPECT_EQ(peek->digest_hex, whole->digest_hex);
  EXPECT_EQ(peek->total_bytes, whole->total_bytes);
  ASSERT_EQ(peek->sections.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(peek->sections[i].name, whole->sections[i].name);
    EXPECT_EQ(peek->sections[i].compressed_bytes, whole->sections[i].compressed_bytes);
    EXPECT_EQ(peek->sections[i].uncompressed_bytes, whole->sections[i].uncompressed_bytes);
    EXPECT_EQ(peek->sections[i].sha256_hex, whole->sections[i].sha256_hex);
  }
  EXPECT_TRUE(whole->trailer_checked);
  EXPECT_FALSE(peek->trailer_checked);
  EXPECT_LT(r.read, 4u * 4096) << "read " << r.read << " of " << bytes->size();
}

TEST(ArtifactBundlePeek, RefusesCutAndDamagedBundles) {
  auto bytes = write_bundle({{"key", k_key_a}}, {{"a", noise(10000)}, {"b", noise(100)}});
  ASSERT_TRUE(bytes.ok());
  for (std::size_t n : {0ul, 5ul, 20ul, 40ul, bytes->size() / 2, bytes->size() - 1}) {
    Bytes cut(bytes->begin(), bytes->begin() + static_cast<std::ptrdiff_t>(n));
    Reader r{cut};
    auto s = inspect_bundle_ranges(cut.size(), r.fn());
    ASSERT_FALSE(s.ok()) << "cut at " << n;
    EXPECT_TRUE(s.error().code == Errc::truncated || s.error().code == Errc::bad_magic) << n << s.error().message;
  }
  Bytes grown = *bytes;
  grown.push_back(0);
  Reader g{grown};
  EXPECT_EQ(inspect_bundle_ranges(grown.size(), g.fn()).error().code, Errc::corrupt);
  // A reader that fails: its error, unchanged.
  auto failing = [](std::uint64_t, std::uint64_t) -> Result<Bytes> { return make_error(Errc::unavailable, "down"); };
  EXPECT_EQ(inspect_bundle_ranges(bytes->size(), failing).error().code, Errc::unavailable);
  // A store that hands back fewer bytes than it holds (a truncated object).
  Reader shortr{*bytes};
  auto shorted = [&](std::uint64_t off, std::uint64_t len) -> Result<Bytes> {
    auto b = shortr.fn()(off, len);
    if (b && off > 0 && !b->empty()) b->pop_back();
    return b;
  };
  EXPECT_EQ(inspect_bundle_ranges(bytes->size(), shorted).error().code, Errc::truncated);
}

}  // namespace
}  // namespace kcache::artifact
