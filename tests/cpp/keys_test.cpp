#include <gtest/gtest.h>

#include "keys/cache_key.hpp"
#include "keys/explanation.hpp"

namespace kcache::keys {
namespace {

KeyFields sample() {
  KeyFields f;
  f.region = "graph:add(mul(p0,a0),c1)";
  f.dtype = "float32";
  f.target = "cpu:avx512:g++12";
  f.mode = "{\"backend\":\"inductor\",\"mode\":\"default\"}";
  f.toolchain = "torch-2.13.0";
  f.env = "{}";
  return f;
}

TEST(CacheKey, KnownAnswerIsStable) {
  // Pins the encoding: if this changes, every stored key changes, which
  // must come with a schema bump (docs/keys.md).
  auto k = compute_key(sample());
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->hex().size(), 64u);
  EXPECT_EQ(k->hex(), compute_key(sample())->hex());
  EXPECT_EQ(k->hex(), "33a954dad2fb02af8eff52f3f57b378f80d518a56f72eac32b0e38c046715e94");
}

TEST(CacheKey, TaggedFieldsCannotCollideByConcatenation) {
  KeyFields a = sample();
  KeyFields b = sample();
  a.dtype = "float32";
  a.target = "cpu";
  b.dtype = "float32c";
  b.target = "pu";
  EXPECT_EQ(a.dtype + a.target, b.dtype + b.target);
  EXPECT_NE(compute_key(a)->hex(), compute_key(b)->hex());
  // The same bytes moved across any boundary.
  KeyFields c = sample();
  KeyFields d = sample();
  c.mode = "xy";
  c.toolchain = "z";
  d.mode = "x";
  d.toolchain = "yz";
  EXPECT_NE(compute_key(c)->hex(), compute_key(d)->hex());
}

TEST(CacheKey, EveryFieldChangesTheKey) {
  const std::string base = compute_key(sample())->hex();
  for (Field f : k_all_fields) {
    KeyFields changed = sample();
    changed.get(f) += "!";
    EXPECT_NE(compute_key(changed)->hex(), base) << field_name(f);
  }
}

TEST(CacheKey, EmptyFieldIsAnError) {
  for (Field f : k_all_fields) {
    KeyFields fields = sample();
    fields.get(f).clear();
    auto k = compute_key(fields);
    ASSERT_FALSE(k.ok()) << field_name(f);
    EXPECT_EQ(k.error().code, Errc::invalid_argument);
  }
}

TEST(CacheKey, ParseAndPrint) {
  auto k = compute_key(sample());
  auto parsed = CacheKey::parse(k->hex());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, *k);
  const std::string good = k->hex();
  for (const std::string& bad :
       {std::string(""), good.substr(1), good + "0", std::string(64, 'A'), std::string(64, 'g'),
        good.substr(0, 63) + " ", std::string("../") + good.substr(3)}) {
    auto r = CacheKey::parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::invalid_argument);
  }
}

TEST(Label, Validation) {
  EXPECT_TRUE(validate_label("GPT2Block/cpu:avx512/f32/default/train").ok());
  EXPECT_FALSE(validate_label("").ok());
  EXPECT_FALSE(validate_label("has space").ok());
  EXPECT_FALSE(validate_label("tab\t").ok());
  EXPECT_FALSE(validate_label(std::string(201, 'a')).ok());
}

TEST(Explanation, RoundTripsThroughJson) {
  auto e = explain(sample(), "Block/cpu/f32/default/train", {{"region", "12 ops"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->key, compute_key(sample())->hex());
  auto text = e->to_json().dump();
  auto back = Explanation::from_json(nlohmann::json::parse(text));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->key, e->key);
  EXPECT_EQ(back->label, e->label);
  ASSERT_EQ(back->fields.size(), k_all_fields.size());
  EXPECT_EQ(back->fields.at("region").detail, "12 ops");
  EXPECT_EQ(back->fields.at("dtype").value, "float32");
  EXPECT_TRUE(diff(*e, *back).empty());
}

TEST(Explanation, LongOrBinaryValuesAreHashOnly) {
  KeyFields f = sample();
  f.region = std::string(k_max_inline_value + 1, 'x');
  f.env = std::string("a\0b", 3);
  auto e = explain(f, "L");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->fields.at("region").value.empty());
  EXPECT_EQ(e->fields.at("region").size, k_max_inline_value + 1);
  EXPECT_TRUE(e->fields.at("env").value.empty());
}

TEST(Explanation, FromJsonRejectsMalformed) {
  auto good = explain(sample(), "L")->to_json();
  for (const char* member : {"key", "label", "fields"}) {
    auto j = good;
    j.erase(member);
    EXPECT_FALSE(Explanation::from_json(j).ok()) << member;
  }
  auto j = good;
  j["key"] = "zz";
  EXPECT_FALSE(Explanation::from_json(j).ok());
  j = good;
  j["fields"]["dtype"]["size"] = "big";
  EXPECT_FALSE(Explanation::from_json(j).ok());
  EXPECT_FALSE(Explanation::from_json(nlohmann::json::array()).ok());
}

TEST(Explanation, DiffNamesExactlyTheChangedFields) {
  auto base = explain(sample(), "L");
  KeyFields changed = sample();
  changed.target = "cpu:avx2:g++12";
  changed.env = "{\"OMP_NUM_THREADS\":\"4\"}";
  auto other = explain(changed, "L");
  auto d = diff(*base, *other);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, "target");
  EXPECT_EQ(d[0].left.value, "cpu:avx512:g++12");
  EXPECT_EQ(d[0].right.value, "cpu:avx2:g++12");
  EXPECT_EQ(d[1].field, "env");
  // A field missing on one side differs.
  auto partial = *other;
  partial.fields.erase("mode");
  auto d2 = diff(*other, partial);
  ASSERT_EQ(d2.size(), 1u);
  EXPECT_EQ(d2[0].field, "mode");
}

}  // namespace
}  // namespace kcache::keys
