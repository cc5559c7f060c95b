// Bundle round trips and every hostile input docs/artifact.md lists, each
// with its own Errc. Hostile bundles are built by mutating valid ones and
// resealing the trailer, so only the check under test can catch them.
#include <gtest/gtest.h>

#include <random>

#include "artifact/bundle.hpp"
#include "artifact_test_util.hpp"

namespace kcache::artifact {
namespace {

using namespace test_util;

Bytes text_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

nlohmann::json manifest() {
  return {{"key", k_key_a}, {"label", "model.layers.0"}, {"producer", "test"},
          {"compile_seconds", 12.5}, {"explanation", {{"torch", "2.9.0"}}}};
}

Bytes small_bundle() {
  auto b = write_bundle(manifest(), {{"a", text_bytes("alpha")}, {"b", text_bytes("beta")}});
  EXPECT_TRUE(b.ok());
  return *b;
}

Errc read_errc(const Bytes& b, const ReadOptions& opts = {}) {
  auto r = read_bundle(b, opts);
  EXPECT_FALSE(r.ok()) << "unexpectedly accepted";
  return r.ok() ? Errc::internal : r.error().code;
}

// Offsets in a bundle with one manifest of length m (docs/artifact.md).
std::size_t section_count_at(std::size_t m) { return 28 + m; }
std::size_t first_section_at(std::size_t m) { return 32 + m; }

TEST(ArtifactBundle, RoundTripsSectionsOfAllSizes) {
  std::vector<Section> sections = {{"empty", {}},
                                   {"text", text_bytes("hello kcache")},
                                   {"random-5mb", random_bytes(5 << 20, 1)},
                                   {"zeros-5mb", Bytes(5 << 20, 0)}};
  auto bytes = write_bundle(manifest(), sections);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto b = read_bundle(*bytes, {});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->manifest, manifest());
  ASSERT_EQ(b->sections.size(), sections.size());
  for (std::size_t i = 0; i < sections.size(); ++i) {
    EXPECT_EQ(b->sections[i].name, sections[i].name);
    EXPECT_EQ(b->sections[i].data, sections[i].data);
  }
  EXPECT_FALSE(b->signer_key_id.has_value());
  EXPECT_FALSE(b->signature_verified);
  EXPECT_EQ(b->digest_hex.size(), 64u);

  auto s = inspect_bundle(*bytes);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->format_version, 1u);
  EXPECT_EQ(s->total_bytes, bytes->size());
  EXPECT_EQ(s->digest_hex, b->digest_hex);
  EXPECT_EQ(s->manifest, manifest());
  ASSERT_EQ(s->sections.size(), 4u);
  EXPECT_EQ(s->sections[2].name, "random-5mb");
  EXPECT_EQ(s->sections[2].uncompressed_bytes, 5u << 20);
  EXPECT_LT(s->sections[3].compressed_bytes, 4096u);
}

TEST(ArtifactBundle, ZeroSectionsAndNoDecompress) {
  auto none = write_bundle(manifest(), {});
  ASSERT_TRUE(none.ok());
  auto r = read_bundle(*none, {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->sections.empty());

  ReadOptions opts;
  opts.decompress = false;
  auto names = read_bundle(small_bundle(), opts);
  ASSERT_TRUE(names.ok());
  ASSERT_EQ(names->sections.size(), 2u);
  EXPECT_EQ(names->sections[1].name, "b");
  EXPECT_TRUE(names->sections[1].data.empty());
}

TEST(ArtifactBundle, WriterMatchesTheDocumentedLayout) {
  Bytes alpha = text_bytes("alpha");
  auto written = write_bundle({{"key", k_key_a}}, {{"a", alpha}});
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, assemble(manifest_for(k_key_a), {raw_section("a", alpha)}));
}

TEST(ArtifactBundle, WriterRefusesBadInput) {
  auto code = [](const nlohmann::json& m, const std::vector<Section>& s, int level = 3) {
    auto r = write_bundle(m, s, nullptr, level);
    return r.ok() ? Errc::internal : r.error().code;
  };
  EXPECT_EQ(code(nlohmann::json::array(), {}), Errc::invalid_argument);
  EXPECT_EQ(code({{"key", "ABC"}}, {}), Errc::invalid_argument);
  EXPECT_EQ(code({{"key", std::string(64, 'A')}}, {}), Errc::invalid_argument);
  EXPECT_EQ(code({{"label", "x"}}, {}), Errc::invalid_argument);
  EXPECT_EQ(code(manifest(), {{"a", {}}, {"a", {}}}), Errc::invalid_argument);
  EXPECT_EQ(code(manifest(), {{"", {}}}), Errc::invalid_argument);
  EXPECT_EQ(code(manifest(), {{"has space", {}}}), Errc::invalid_argument);
  EXPECT_EQ(code(manifest(), {{std::string(256, 'n'), {}}}), Errc::invalid_argument);
  EXPECT_EQ(code(manifest(), {}, 0), Errc::invalid_argument);
  EXPECT_EQ(code(manifest(), {}, 20), Errc::invalid_argument);
  EXPECT_EQ(code({{"key", k_key_a}, {"bad", "\xff\xfe"}}, {}), Errc::invalid_argument);
  EXPECT_TRUE(write_bundle(manifest(), {{std::string(255, 'n'), {}}}).ok());
}

TEST(ArtifactBundle, EveryTruncationIsTruncated) {
  Bytes full = small_bundle();
  for (std::size_t n = 0; n < full.size(); ++n) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(read_errc(cut), Errc::truncated) << "cut at " << n;
    auto s = inspect_bundle(cut);
    EXPECT_FALSE(s.ok());
  }
}

TEST(ArtifactBundle, WrongMagicVersionFlagsAndTrailingBytes) {
  EXPECT_EQ(read_errc(text_bytes("hello world, not a bundle at all....")), Errc::bad_magic);
  EXPECT_EQ(read_errc(text_bytes("KCX")), Errc::bad_magic);

  Bytes v2 = small_bundle();
  patch_le(v2, 8, 2, 4);
  reseal(v2);
  EXPECT_EQ(read_errc(v2), Errc::bad_version);

  Bytes flags = small_bundle();
  patch_le(flags, 12, 0x80, 4);
  reseal(flags);
  EXPECT_EQ(read_errc(flags), Errc::corrupt);

  Bytes longer = small_bundle();
  longer.push_back(0);
  EXPECT_EQ(read_errc(longer), Errc::corrupt);

  Bytes trailer = small_bundle();
  trailer.back() ^= 1;
  EXPECT_EQ(read_errc(trailer), Errc::corrupt);
}

TEST(ArtifactBundle, EveryFlippedByteIsRefusedByRegion) {
  Bytes good = small_bundle();
  for (std::size_t i = 0; i < good.size(); ++i) {
    Bytes b = good;
    b[i] ^= 0xff;
    Errc e = read_errc(b);
    if (i < 8) {
      EXPECT_EQ(e, Errc::bad_magic) << i;
    } else if (i < 12) {
      EXPECT_EQ(e, Errc::bad_version) << i;
    } else if (i >= 16 && i < 24) {  // total_length: too small, too big or over the limit
      EXPECT_TRUE(e == Errc::corrupt || e == Errc::truncated || e == Errc::too_large) << i;
    } else {
      EXPECT_EQ(e, Errc::corrupt) << i;
    }
    EXPECT_FALSE(inspect_bundle(b).ok()) << i;
  }
}

TEST(ArtifactBundle, LyingManifestLength) {
  const std::string m = manifest_for(k_key_a);
  Bytes good = assemble(m, {raw_section("a", text_bytes("alpha"))});
  auto with_len = [&](std::uint64_t len) {
    Bytes b = good;
    patch_le(b, 24, len, 4);
    reseal(b);
    return read_errc(b);
  };
  EXPECT_EQ(with_len(0xffffffffu), Errc::too_large);
  EXPECT_EQ(with_len((16u << 20) + 1), Errc::too_large);
  EXPECT_EQ(with_len(m.size() + 1000), Errc::truncated);
  EXPECT_EQ(with_len(m.size() - 1), Errc::corrupt);  // cuts the JSON
}

TEST(ArtifactBundle, LyingSectionTable) {
  const std::string m = manifest_for(k_key_a);
  Bytes data = text_bytes("alpha alpha alpha alpha");
  Bytes good = assemble(m, {raw_section("a", data)});
  const std::size_t count_at = section_count_at(m.size());
  const std::size_t ulen_at = first_section_at(m.size()) + 2 + 1;
  const std::size_t clen_at = ulen_at + 8;
  auto patched = [&](std::size_t at, std::uint64_t v, int width) {
    Bytes b = good;
    patch_le(b, at, v, width);
    reseal(b);
    return b;
  };
  EXPECT_EQ(read_errc(patched(count_at, 0xffffffffu, 4)), Errc::too_large);
  EXPECT_EQ(read_errc(patched(count_at, 2, 4)), Errc::truncated);
  EXPECT_EQ(read_errc(patched(count_at, 0, 4)), Errc::corrupt);  // bytes after the table
  EXPECT_EQ(read_errc(patched(first_section_at(m.size()), 0xffff, 2)), Errc::truncated);
  EXPECT_EQ(read_errc(patched(first_section_at(m.size()), 0, 2)), Errc::corrupt);
  EXPECT_EQ(read_errc(patched(ulen_at, 1ull << 63, 8)), Errc::too_large);
  EXPECT_EQ(read_errc(patched(ulen_at, (1ull << 30) + 1, 8)), Errc::too_large);
  EXPECT_EQ(read_errc(patched(clen_at, 1ull << 63, 8)), Errc::truncated);
  EXPECT_EQ(read_errc(patched(clen_at, ~0ull, 8)), Errc::truncated);
  // A declared size below the real one: stopped by the bounded decompressor.
  EXPECT_EQ(read_errc(patched(ulen_at, data.size() - 1, 8)), Errc::too_large);
  // Above it (even the full 1 GiB limit): nothing allocated up front, and the
  // short output is corrupt.
  EXPECT_EQ(read_errc(patched(ulen_at, data.size() + 1, 8)), Errc::corrupt);
  EXPECT_EQ(read_errc(patched(ulen_at, 1ull << 30, 8)), Errc::corrupt);
  // inspect_bundle checks limits and lengths but does not decompress.
  EXPECT_TRUE(inspect_bundle(patched(ulen_at, 1ull << 30, 8)).ok());
  EXPECT_EQ(inspect_bundle(patched(count_at, 2, 4)).error().code, Errc::truncated);
}

// One zstd frame of RLE blocks that expands to `total` zero bytes: four
// bytes per 128 KiB, so 1 GB of zeros is 32 KiB.
Bytes zero_bomb_frame(std::uint64_t total) {
  Bytes f;
  put_le(f, 0xFD2FB528u, 4);
  f.push_back(0x00);  // frame header descriptor: no content size, no checksum
  f.push_back(0x38);  // window descriptor: 2^(10+7) = 128 KiB
  const std::uint64_t block = 128 << 10;
  while (total > 0) {
    std::uint64_t n = std::min(total, block);
    total -= n;
    std::uint32_t header = (total == 0 ? 1u : 0u) | (1u << 1) | static_cast<std::uint32_t>(n << 3);
    put_le(f, header, 3);
    f.push_back(0x00);
  }
  return f;
}

TEST(ArtifactBundle, ZstdBombIsStoppedAtTheDeclaredSize) {
  const std::uint64_t declared = 1 << 20;
  Bytes zeros(declared, 0);
  // Sanity: the hand-built frame is valid zstd.
  RawSection fine{"bomb", declared, zero_bomb_frame(declared), sha256(std::span<const std::uint8_t>(zeros))};
  auto ok = read_bundle(assemble(manifest_for(k_key_a), {fine}), {});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->sections[0].data, zeros);

  RawSection bomb = fine;
  bomb.compressed = zero_bomb_frame(1ull << 30);
  EXPECT_LT(bomb.compressed.size(), 40000u);
  Bytes b = assemble(manifest_for(k_key_a), {bomb});
  EXPECT_EQ(read_errc(b), Errc::too_large);
  EXPECT_TRUE(inspect_bundle(b).ok());  // structurally fine: only decompression finds it
}

TEST(ArtifactBundle, HostileZstdPayloads) {
  Bytes data = text_bytes("some section bytes");
  Digest sha = sha256(std::span<const std::uint8_t>(data));
  auto with = [&](Bytes compressed, std::uint64_t declared) {
    return assemble(manifest_for(k_key_a), {RawSection{"s", declared, std::move(compressed), sha}});
  };
  EXPECT_EQ(read_errc(with(data, data.size())), Errc::corrupt);  // not zstd
  Bytes frame = zstd(data);
  Bytes cut(frame.begin(), frame.end() - 3);
  EXPECT_EQ(read_errc(with(cut, data.size())), Errc::corrupt);  // ends inside a frame
  Bytes wide = zero_bomb_frame(16);
  wide[5] = 0xa0;  // window 2^30
  EXPECT_EQ(read_errc(with(wide, 16)), Errc::too_large);
  EXPECT_EQ(read_errc(with({}, data.size())), Errc::corrupt);
  Bytes two = zstd(Bytes(data.begin(), data.begin() + 4));
  Bytes rest = zstd(Bytes(data.begin() + 4, data.end()));
  two.insert(two.end(), rest.begin(), rest.end());
  EXPECT_TRUE(read_bundle(with(two, data.size()), {}).ok());  // concatenated frames are fine
  RawSection empty{"e", 0, {}, sha256(std::span<const std::uint8_t>())};
  EXPECT_TRUE(read_bundle(assemble(manifest_for(k_key_a), {empty}), {}).ok());
  Bytes wrong_sha = with(frame, data.size());
  wrong_sha[first_section_at(manifest_for(k_key_a).size()) + 2 + 1 + 16] ^= 1;
  reseal(wrong_sha);
  EXPECT_EQ(read_errc(wrong_sha), Errc::corrupt);
}

TEST(ArtifactBundle, HostileManifests) {
  auto code = [](const std::string& m) { return read_errc(assemble(m, {})); };
  EXPECT_EQ(code("{\"key\": "), Errc::corrupt);
  EXPECT_EQ(code("[1,2,3]"), Errc::corrupt);
  EXPECT_EQ(code("{\"label\":\"x\"}"), Errc::corrupt);
  EXPECT_EQ(code("{\"key\":\"" + std::string(64, 'A') + "\"}"), Errc::corrupt);
  EXPECT_EQ(code("{\"key\":\"" + k_key_a + "\",\"s\":\"\xff\"}"), Errc::corrupt);
  EXPECT_EQ(code(""), Errc::corrupt);
  std::string deep = "{\"key\":\"" + k_key_a + "\",\"d\":" + std::string(1000, '[') +
                     std::string(1000, ']') + "}";
  EXPECT_EQ(code(deep), Errc::corrupt);
  EXPECT_TRUE(read_bundle(assemble(manifest_for(k_key_a), {}), {}).ok());
}

TEST(ArtifactBundle, DuplicateAndInvalidSectionNames) {
  Bytes x = text_bytes("x");
  EXPECT_EQ(read_errc(assemble(manifest_for(k_key_a), {raw_section("a", x), raw_section("a", x)})),
            Errc::corrupt);
  EXPECT_EQ(read_errc(assemble(manifest_for(k_key_a), {raw_section("a b", x)})), Errc::corrupt);
  EXPECT_EQ(read_errc(assemble(manifest_for(k_key_a), {raw_section("", x)})), Errc::corrupt);
}

TEST(ArtifactBundle, ExpectedKey) {
  ReadOptions opts;
  opts.expected_key = k_key_b;
  EXPECT_EQ(read_errc(small_bundle(), opts), Errc::key_mismatch);
  opts.expected_key = k_key_a;
  EXPECT_TRUE(read_bundle(small_bundle(), opts).ok());
}

TEST(ArtifactBundle, CallerLimits) {
  Bytes b = small_bundle();
  auto limited = [&](auto edit) {
    ReadOptions opts;
    edit(opts.limits);
    return read_errc(b, opts);
  };
  EXPECT_EQ(limited([&](ReadLimits& l) { l.max_bundle_bytes = b.size() - 1; }), Errc::too_large);
  EXPECT_EQ(limited([](ReadLimits& l) { l.max_manifest_bytes = 10; }), Errc::too_large);
  EXPECT_EQ(limited([](ReadLimits& l) { l.max_sections = 1; }), Errc::too_large);
  EXPECT_EQ(limited([](ReadLimits& l) { l.max_section_uncompressed_bytes = 4; }), Errc::too_large);
  EXPECT_EQ(limited([](ReadLimits& l) { l.max_total_uncompressed_bytes = 8; }), Errc::too_large);
  ReadLimits tight;
  tight.max_sections = 1;
  EXPECT_EQ(inspect_bundle(b, tight).error().code, Errc::too_large);
}

}  // namespace
}  // namespace kcache::artifact
