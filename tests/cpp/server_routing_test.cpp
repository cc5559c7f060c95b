// Route matching, query parsing, configuration parsing and the metadata the
// server derives from a verified manifest (server/http_front/router.hpp,
// server/config.hpp, server/http/bundle_check.hpp).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "artifact/bundle.hpp"
#include "server/config.hpp"
#include "server/http/bundle_check.hpp"
#include "server/http_front/router.hpp"

namespace kcache::server {
namespace {

const std::string k_key(64, 'a');

RouteMatch must_match(const std::string& path) {
  auto m = match_route(path);
  EXPECT_TRUE(std::holds_alternative<RouteMatch>(m)) << path;
  return std::get<RouteMatch>(m);
}

RouteError must_fail(const std::string& path) {
  auto m = match_route(path);
  EXPECT_TRUE(std::holds_alternative<RouteError>(m)) << path;
  return std::holds_alternative<RouteError>(m) ? std::get<RouteError>(m) : RouteError{0, "", ""};
}

TEST(Router, MatchesEveryRoute) {
  EXPECT_EQ(must_match("/healthz").id, RouteId::healthz);
  EXPECT_EQ(must_match("/readyz").id, RouteId::readyz);
  EXPECT_EQ(must_match("/metrics").id, RouteId::metrics);
  EXPECT_EQ(must_match("/v1/stats").id, RouteId::stats);
  EXPECT_EQ(must_match("/v1/leases").id, RouteId::leases);
  EXPECT_EQ(must_match("/v1/entries").id, RouteId::entries);
  EXPECT_EQ(must_match("/v1/evict").id, RouteId::evict);
  EXPECT_EQ(must_match("/v1/verify").id, RouteId::verify);
  auto a = must_match("/v1/artifacts/" + k_key);
  EXPECT_EQ(a.id, RouteId::artifact);
  EXPECT_EQ(a.key, k_key);
  EXPECT_STREQ(a.tmpl, "/v1/artifacts/{key}");
  EXPECT_EQ(must_match("/v1/entries/" + k_key).id, RouteId::entry);
  EXPECT_EQ(must_match("/v1/leases/" + k_key).id, RouteId::lease);
  EXPECT_EQ(must_match("/v1/leases/" + k_key + "/renew").id, RouteId::lease_renew);
}

TEST(Router, RejectsBadKeysWith400) {
  for (const std::string& bad : {std::string(64, 'A'), std::string(63, 'a'), std::string(65, 'a'),
                                std::string(64, 'g'), std::string(""), k_key + ".x"}) {
    EXPECT_EQ(must_fail("/v1/artifacts/" + bad).status, 400) << bad;
    EXPECT_EQ(must_fail("/v1/entries/" + bad).status, 400) << bad;
  }
  EXPECT_EQ(must_fail("/v1/leases/" + std::string(10, 'a') + "/renew").code, "invalid_key");
}

TEST(Router, RejectsTraversalAndEscapes) {
  for (const char* p : {"/v1/artifacts/../etc/passwd", "/v1/artifacts/%2e%2e/x", "/v1//stats", "/./healthz",
                        "relative", "", "/v1/artifacts/a\\b", "/heal thz"}) {
    auto e = must_fail(p);
    EXPECT_EQ(e.status, 400) << p;
    EXPECT_EQ(e.code, "bad_path") << p;
  }
}

TEST(Router, UnknownRoutesAre404) {
  EXPECT_EQ(must_fail("/v2/artifacts").status, 404);
  EXPECT_EQ(must_fail("/v1/leases/" + k_key + "/steal").status, 404);
}

TEST(Router, MethodsAndRoles) {
  EXPECT_TRUE(method_allowed(RouteId::artifact, "PUT"));
  EXPECT_FALSE(method_allowed(RouteId::artifact, "POST"));
  EXPECT_FALSE(method_allowed(RouteId::evict, "GET"));
  EXPECT_STREQ(allowed_methods(RouteId::lease), "POST, DELETE");
  EXPECT_EQ(required_role(RouteId::artifact, "GET"), Role::read);
  EXPECT_EQ(required_role(RouteId::artifact, "PUT"), Role::write);
  EXPECT_EQ(required_role(RouteId::artifact, "DELETE"), Role::admin);
  EXPECT_EQ(required_role(RouteId::evict, "POST"), Role::admin);
  EXPECT_TRUE(takes_large_body(RouteId::artifact, "PUT"));
  EXPECT_FALSE(takes_large_body(RouteId::evict, "POST"));
}

TEST(Router, ParsesQueries) {
  auto q = parse_query("label_prefix=GPT2Block%2Fcpu&limit=5&flag&a+b=c+d");
  ASSERT_TRUE(q);
  EXPECT_EQ((*q)["label_prefix"], "GPT2Block/cpu");
  EXPECT_EQ((*q)["limit"], "5");
  EXPECT_EQ((*q)["flag"], "");
  EXPECT_EQ((*q)["a b"], "c d");
  EXPECT_FALSE(parse_query("x=%zz"));
  EXPECT_FALSE(parse_query("x=%4"));
  EXPECT_FALSE(parse_query("x=%"));
}

TEST(Config, ParsesSizes) {
  EXPECT_EQ(parse_size("123"), 123u);
  EXPECT_EQ(parse_size("20G"), 20ull << 30);
  EXPECT_EQ(parse_size("500M"), 500ull << 20);
  EXPECT_EQ(parse_size("64k"), 64ull << 10);
  EXPECT_EQ(parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_size("2 GB"), 2ull << 30);
  for (const char* bad : {"", "G", "lots", "1.2.3", "-5", "5X", "1.5"}) EXPECT_FALSE(parse_size(bad)) << bad;
}

TEST(Config, ParsesHostPort) {
  auto hp = parse_host_port("127.0.0.1:8420");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->first, "127.0.0.1");
  EXPECT_EQ(hp->second, 8420);
  hp = parse_host_port("[::1]:0");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->first, "::1");
  for (const char* bad : {"nowhere", ":80", "host:", "host:99999", "::1:80", "h:8x"}) {
    EXPECT_FALSE(parse_host_port(bad)) << bad;
  }
}

TEST(Config, CommandLineBeatsFile) {
  std::string path = ::testing::TempDir() + "/kcache-server-test.conf";
  {
    std::ofstream f(path);
    f << "# comment\nstorage = memory:\nlease-ttl-ms=1234\nmax-bytes=\"1G\"\n";
  }
  const char* argv[] = {"kcache-server", "--config", path.c_str(), "--lease-ttl-ms", "999"};
  auto c = parse_config(5, argv, nullptr);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->storage, "memory:");
  EXPECT_EQ(c->lease_ttl_ms, 999u);
  EXPECT_EQ(c->max_bytes, 1ull << 30);
  EXPECT_EQ(c->listen_port, 8420);
}

TEST(Config, RejectsUnknownFileKeys) {
  std::string path = ::testing::TempDir() + "/kcache-server-bad.conf";
  {
    std::ofstream f(path);
    f << "listne=127.0.0.1:1\n";
  }
  const char* argv[] = {"kcache-server", "--config", path.c_str()};
  EXPECT_THROW(parse_config(3, argv, nullptr), ConfigError);
}

nlohmann::json manifest(const std::string& key) {
  nlohmann::json tc_value = {{"torch", "2.13.0"}, {"triton", nullptr}};
  return {{"key", key},
          {"label", "GPT2Block/cpu:avx512/f32/default/train"},
          {"compile_seconds", 1.2345},
          {"explanation",
           {{"key", key}, {"label", "x"}, {"fields", {{"toolchain", {{"hash", std::string(64, 'c')}, {"value", tc_value.dump()}}}}}}}};
}

TEST(BundleCheck, MetadataFromManifest) {
  auto m = meta_from_manifest(manifest(k_key));
  EXPECT_EQ(m.label, "GPT2Block/cpu:avx512/f32/default/train");
  EXPECT_EQ(m.target, "cpu:avx512");
  EXPECT_EQ(m.dtype, "f32");
  EXPECT_EQ(m.mode, "default");
  EXPECT_EQ(m.toolchain, "torch-2.13.0");
  EXPECT_EQ(m.compile_ms, 1235u);
  auto j = manifest(k_key);
  j["explanation"]["fields"]["toolchain"].erase("value");
  EXPECT_EQ(meta_from_manifest(j).toolchain, "tc-cccccccccccc");
  EXPECT_EQ(meta_from_manifest(nlohmann::json::object()).toolchain, "unknown");
  j["label"] = std::string("bad\nlabel/t");
  EXPECT_EQ(meta_from_manifest(j).label, "bad?label/t");
}

TEST(BundleCheck, VerifiesTrailerAndKey) {
  std::vector<artifact::Section> secs = {{"mega_cache", {1, 2, 3}}};
  auto bytes = artifact::write_bundle(manifest(k_key), secs);
  ASSERT_TRUE(bytes);
  auto ok = check_upload(k_key, *bytes, 1 << 20);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->meta.target, "cpu:avx512");
  EXPECT_TRUE(bundle_matches_key(k_key, *bytes));

  auto other = check_upload(std::string(64, 'b'), *bytes, 1 << 20);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, Errc::key_mismatch);
  EXPECT_FALSE(bundle_matches_key(std::string(64, 'b'), *bytes));

  auto corrupt = *bytes;
  corrupt.back() ^= 1;
  EXPECT_FALSE(check_upload(k_key, corrupt, 1 << 20));
  EXPECT_EQ(check_upload(k_key, *bytes, 16).error().code, Errc::too_large);
}

}  // namespace
}  // namespace kcache::server
