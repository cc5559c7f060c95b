// Tokens, roles and signed uploads (server/http_front/authorizer.hpp,
// server/trusted_keys.hpp, server/http/bundle_check.hpp SignaturePolicy).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "artifact/bundle.hpp"
#include "server/http/bundle_check.hpp"
#include "server/http_front/authorizer.hpp"
#include "server/http_front/http_types.hpp"
#include "server/http_front/router.hpp"
#include "server/trusted_keys.hpp"

namespace kcache::server {
namespace {

const std::string k_read = "read-token-aaaaaaaaaaaa";
const std::string k_write = "write-token-bbbbbbbbbbb";
const std::string k_admin = "admin-token-ccccccccccc";

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / ("kcache-auth-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p) << text;
  return p;
}

Request with_auth(const std::string& header, bool loopback = true) {
  Request r;
  r.peer_loopback = loopback;
  if (!header.empty()) r.headers.emplace_back("authorization", header);
  return r;
}

std::unique_ptr<Authorizer> token_authorizer(bool anonymous_read) {
  auto f = temp_file("tokens", "# comment\n\n" + k_read + " read\n" + k_write + "\twrite\n  " + k_admin + " admin  \n");
  auto a = make_authorizer({f.string(), anonymous_read, false, false, ""});
  EXPECT_TRUE(a) << (a ? "" : a.error().message);
  std::filesystem::remove(f);
  return std::move(*a);
}

TEST(Tokens, ParsesAndRejects) {
  auto ok = parse_tokens(k_read + " read\n" + k_admin + " admin\n");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].role, Role::admin);
  EXPECT_FALSE(parse_tokens(""));
  EXPECT_FALSE(parse_tokens("short read\n"));
  EXPECT_FALSE(parse_tokens(k_read + " root\n"));
  EXPECT_FALSE(parse_tokens(k_read + " read extra\n"));
  EXPECT_FALSE(parse_tokens(k_read + " read\n" + k_read + " admin\n"));
  EXPECT_FALSE(parse_tokens("tok\"en-with-a-quote-x read\n"));
  // Messages name the line, never the token.
  auto bad = parse_tokens("\n" + k_read + " root\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos);
  EXPECT_EQ(bad.error().message.find(k_read), std::string::npos);
}

TEST(Tokens, RolesNest) {
  auto a = token_authorizer(false);
  const std::pair<std::string, Role> have[] = {{k_read, Role::read}, {k_write, Role::write}, {k_admin, Role::admin}};
  for (const auto& [token, role] : have) {
    for (Role needed : {Role::read, Role::write, Role::admin}) {
      auto d = a->authorize(with_auth("Bearer " + token), needed);
      EXPECT_EQ(d.allowed, static_cast<int>(role) >= static_cast<int>(needed));
      if (!d.allowed) {
        EXPECT_EQ(d.status, 403);
        EXPECT_TRUE(d.www_authenticate.empty());
      }
    }
  }
}

TEST(Tokens, MissingWrongOrMalformedIs401) {
  auto a = token_authorizer(false);
  for (const std::string& h : std::vector<std::string>{"", "Bearer nope-nope-nope-nope", "Basic Zm9vOmJhcg==", "Bearer", k_admin}) {
    auto d = a->authorize(with_auth(h), Role::read);
    EXPECT_FALSE(d.allowed) << h;
    EXPECT_EQ(d.status, 401) << h;
    EXPECT_EQ(d.www_authenticate.rfind("Bearer realm=\"kcache\"", 0), 0u) << h;
  }
  // Loopback grants nothing once tokens exist; open routes need nothing.
  EXPECT_FALSE(a->authorize(with_auth("", true), Role::read).allowed);
  EXPECT_TRUE(a->authorize(with_auth("", false), Role::none).allowed);
  EXPECT_TRUE(a->authorize(with_auth("bearer  " + k_read + " "), Role::read).allowed);
}

TEST(Tokens, AnonymousReadOnlyWithoutHeader) {
  auto a = token_authorizer(true);
  EXPECT_TRUE(a->authorize(with_auth(""), Role::read).allowed);
  EXPECT_EQ(a->authorize(with_auth(""), Role::write).status, 401);
  EXPECT_EQ(a->authorize(with_auth("Bearer wrong-wrong-wrong-wrong"), Role::read).status, 401);
}

// RESP asks with its AUTH token directly; HTTP with the Authorization
// header. The same credentials get the same decision either way.
TEST(Tokens, AnAccessRequestDecidesAsTheHeaderDoes) {
  for (bool anonymous : {false, true}) {
    auto a = token_authorizer(anonymous);
    const std::string tokens[] = {k_read, k_write, k_admin, " " + k_write + "\t", "", "  ", "unknown-token-000000000"};
    for (const auto& token : tokens) {
      for (Role needed : {Role::none, Role::read, Role::write, Role::admin}) {
        AccessRequest ask;
        ask.token = token;
        const auto got = a->authorize(ask, needed);
        const auto want = a->authorize(with_auth("Bearer " + token), needed);
        EXPECT_EQ(got.allowed, want.allowed) << "'" << token << "'";
        EXPECT_EQ(got.status, want.status) << "'" << token << "'";
        EXPECT_EQ(got.ns, want.ns) << "'" << token << "'";
        EXPECT_EQ(got.www_authenticate, want.www_authenticate) << "'" << token << "'";
        EXPECT_EQ(a->namespaces_of(ask, needed), a->namespaces_of(with_auth("Bearer " + token), needed));
      }
    }
    // No credentials at all: as a request without the header.
    for (Role needed : {Role::read, Role::write}) {
      EXPECT_EQ(a->authorize(AccessRequest{}, needed).allowed, a->authorize(with_auth(""), needed).allowed);
      EXPECT_EQ(a->authorize(AccessRequest{}, needed).status, a->authorize(with_auth(""), needed).status);
    }
  }
  auto a = token_authorizer(false);
  AccessRequest bad;
  bad.malformed = true;
  EXPECT_EQ(a->authorize(bad, Role::read).status, 401);
  EXPECT_NE(a->authorize(bad, Role::read).www_authenticate.find("invalid_request"), std::string::npos);
}

TEST(Tokens, AccessRequestOfAnHttpRequest) {
  Request r = with_auth("  bearer   " + k_read + " ", false);
  r.headers.emplace_back("x-kcache-namespace", "team-a");
  r.client_cert_verified = true;
  const AccessRequest got = access_request(r);
  ASSERT_TRUE(got.token);
  EXPECT_EQ(*got.token, k_read);
  EXPECT_FALSE(got.malformed);
  ASSERT_TRUE(got.ns);
  EXPECT_EQ(*got.ns, "team-a");
  EXPECT_FALSE(got.peer_loopback);
  EXPECT_TRUE(got.client_cert_verified);
  const AccessRequest basic = access_request(with_auth("Basic Zm9vOmJhcg=="));
  EXPECT_TRUE(basic.malformed);
  EXPECT_FALSE(basic.token);
  EXPECT_TRUE(basic.peer_loopback);
  const AccessRequest none = access_request(with_auth(""));
  EXPECT_FALSE(none.malformed || none.token || none.ns);
}

TEST(Tokens, ReloadSwapsAndKeepsOldOnError) {
  auto f = temp_file("reload", k_read + " read\n");
  auto a = make_authorizer({f.string(), false, false, false, ""});
  ASSERT_TRUE(a);
  std::ofstream(f) << k_admin << " admin\n";
  ASSERT_TRUE((*a)->reload());
  EXPECT_TRUE((*a)->authorize(with_auth("Bearer " + k_admin), Role::admin).allowed);
  EXPECT_FALSE((*a)->authorize(with_auth("Bearer " + k_read), Role::read).allowed);
  std::ofstream(f) << "garbage\n";
  EXPECT_FALSE((*a)->reload());
  EXPECT_TRUE((*a)->authorize(with_auth("Bearer " + k_admin), Role::admin).allowed);
  std::filesystem::remove(f);
}

TEST(Loopback, OnlyLoopbackUnlessForcedOrMtls) {
  auto plain = make_authorizer({"", false, false, false, ""});
  ASSERT_TRUE(plain);
  EXPECT_TRUE((*plain)->authorize(with_auth("", true), Role::admin).allowed);
  EXPECT_EQ((*plain)->authorize(with_auth("", false), Role::read).status, 403);
  EXPECT_TRUE((*plain)->authorize(with_auth("", false), Role::none).allowed);
  auto forced = make_authorizer({"", false, true, false, ""});
  EXPECT_TRUE((*forced)->authorize(with_auth("", false), Role::admin).allowed);
  auto mtls = make_authorizer({"", false, false, true, ""});
  Request verified = with_auth("", false);
  verified.client_cert_verified = true;
  EXPECT_TRUE((*mtls)->authorize(verified, Role::admin).allowed);
  // mTLS credits the connection that showed a certificate, not every peer:
  // a RESP connection (plain TCP) never does.
  EXPECT_EQ((*mtls)->authorize(with_auth("", false), Role::read).status, 403);
}

TEST(Routes, ProbesAndMetricsAreOpen) {
  EXPECT_EQ(required_role(RouteId::healthz, "GET"), Role::none);
  EXPECT_EQ(required_role(RouteId::readyz, "GET"), Role::none);
  EXPECT_EQ(required_role(RouteId::metrics, "GET"), Role::none);
  EXPECT_EQ(required_role(RouteId::stats, "GET"), Role::read);
  EXPECT_EQ(required_role(RouteId::lease, "POST"), Role::write);
  EXPECT_EQ(required_role(RouteId::leases, "GET"), Role::admin);
}

TEST(SignedUploads, PolicyAndTrustedKeys) {
  const std::string key(64, 'a');
  auto trusted = artifact::generate_key_pair();
  auto other = artifact::generate_key_pair();
  ASSERT_TRUE(trusted && other);
  auto pub = temp_file("pub.pem", trusted->public_pem + other->public_pem);
  auto keys = TrustedKeys::load({pub.string()});
  ASSERT_TRUE(keys) << keys.error().message;
  EXPECT_EQ((*keys)->size(), 2u);
  std::ofstream(pub) << trusted->public_pem;
  ASSERT_TRUE((*keys)->reload());
  EXPECT_EQ((*keys)->size(), 1u);
  auto store = (*keys)->snapshot();

  nlohmann::json manifest = {{"key", key}, {"label", "B/cpu:x/f32/default/train"}};
  std::vector<artifact::Section> secs = {{"mega_cache", {1, 2, 3}}};
  auto signer = artifact::SigningKey::from_private_pem(trusted->private_pem);
  auto rogue = artifact::SigningKey::from_private_pem(other->private_pem);
  ASSERT_TRUE(signer && rogue);
  auto unsigned_bytes = artifact::write_bundle(manifest, secs);
  auto signed_bytes = artifact::write_bundle(manifest, secs, &*signer);
  auto rogue_bytes = artifact::write_bundle(manifest, secs, &*rogue);
  ASSERT_TRUE(unsigned_bytes && signed_bytes && rogue_bytes);

  const SignaturePolicy require{store.get(), true};
  const SignaturePolicy if_signed{store.get(), false};
  EXPECT_TRUE(check_upload(key, *signed_bytes, 1 << 20, require));
  EXPECT_EQ(check_upload(key, *unsigned_bytes, 1 << 20, require).error().code, Errc::bad_signature);
  EXPECT_EQ(check_upload(key, *rogue_bytes, 1 << 20, require).error().code, Errc::bad_signature);
  EXPECT_TRUE(check_upload(key, *unsigned_bytes, 1 << 20, if_signed));
  EXPECT_EQ(check_upload(key, *rogue_bytes, 1 << 20, if_signed).error().code, Errc::bad_signature);
  EXPECT_EQ(check_upload(std::string(64, 'b'), *signed_bytes, 1 << 20, require).error().code, Errc::key_mismatch);

  std::ofstream(pub) << "no key here\n";
  EXPECT_FALSE((*keys)->reload());
  EXPECT_EQ((*keys)->size(), 1u);
  std::filesystem::remove(pub);
}

}  // namespace
}  // namespace kcache::server
