// The namespaces file (server/http_front/namespace_file.hpp) and the authorizer's
// namespace resolution (server/http_front/authorizer.hpp): which namespace a
// request acts in, and that a token acts only where it holds a role.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "server/http_front/authorizer.hpp"
#include "server/http_front/http_types.hpp"
#include "server/http_front/namespace_file.hpp"

namespace kcache::server {
namespace {

const std::string k_a = "team-a-token-aaaaaaaaaaa";
const std::string k_b = "team-b-token-bbbbbbbbbbb";
const std::string k_both = "both-token-ccccccccccccc";

std::string file_text() {
  return R"({"namespaces": {
    "team-a": {"tokens": [{"token": ")" + k_a + R"(", "role": "write"}, {"token": ")" + k_both + R"(", "role": "read"}],
               "quota_bytes": "2GiB", "quota_entries": 10, "retention": {"policy": "lru", "window": "2h"}},
    "team-b": {"tokens": [{"token": ")" + k_b + R"(", "role": "admin"}, {"token": ")" + k_both + R"(", "role": "write"}],
               "read_through": ["ci"], "anonymous_read": true},
    "ci": {"trust": {"uploads": "signed", "keys": ["keys/ci.pub"]}}
  }})";
}

TEST(NamespaceFile, ParsesEveryField) {
  auto specs = parse_namespace_file(file_text(), "/etc/kcache");
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 4u);
  EXPECT_EQ((*specs)[0].name, "default");  // added when the file leaves it out
  std::map<std::string, NamespaceSpec> by;
  for (auto& s : *specs) by[s.name] = s;
  EXPECT_EQ(by["team-a"].quota_bytes, 2ull << 30);
  EXPECT_EQ(by["team-a"].quota_entries, 10u);
  EXPECT_EQ(by["team-a"].retention, RetentionPolicy::lru);
  EXPECT_EQ(by["team-a"].value_window_ms, 2 * 3600 * 1000);
  EXPECT_EQ(by["team-a"].tokens.size(), 2u);
  EXPECT_EQ(by["team-a"].tokens[0].ns, "team-a");
  EXPECT_EQ(by["team-b"].read_through, std::vector<std::string>{"ci"});
  EXPECT_TRUE(by["team-b"].anonymous_read);
  EXPECT_TRUE(by["ci"].signed_only);
  EXPECT_EQ(by["ci"].trusted_key_files, std::vector<std::string>{"/etc/kcache/keys/ci.pub"});
  EXPECT_EQ(by["ci"].retention, RetentionPolicy::value);  // the default policy
}

TEST(NamespaceFile, RefusesWithTheNamespaceNamedAndNoToken) {
  const std::string secret = "secret-token-zzzzzzzzzz";
  const std::pair<const char*, std::string> bad[] = {
      {"JSON", "{"},
      {"namespaces", R"({"other": {}})"},
      {"Team", R"({"namespaces": {"Team": {}}})"},
      {"unknown field", R"({"namespaces": {"a": {"quota": 1}}})"},
      {"quota_bytes", R"({"namespaces": {"a": {"quota_bytes": "lots"}}})"},
      {"quota_entries", R"({"namespaces": {"a": {"quota_entries": -1}}})"},
      {"window", R"({"namespaces": {"a": {"retention": {"window": "0s"}}}})"},
      {"policy", R"({"namespaces": {"a": {"retention": {"policy": "lfu"}}}})"},
      {"names no key", R"({"namespaces": {"a": {"trust": {"uploads": "signed"}}}})"},
      {"unknown namespace", R"({"namespaces": {"a": {"read_through": ["ghost"]}}})"},
      {"itself", R"({"namespaces": {"a": {"read_through": ["a"]}}})"},
      {"role", R"({"namespaces": {"a": {"tokens": [{"token": ")" + secret + R"(", "role": "root"}]}}})"},
      {"the same token twice", R"({"namespaces": {"a": {"tokens": [{"token": ")" + secret + R"(", "role": "read"},
                                   {"token": ")" + secret + R"(", "role": "write"}]}}})"},
      {"exactly one", R"({"namespaces": {"a": {"tokens": [{"role": "read"}]}}})"},
      {"sha256", R"({"namespaces": {"a": {"tokens": [{"sha256": "abc", "role": "read"}]}}})"},
  };
  for (const auto& [want, text] : bad) {
    auto r = parse_namespace_file(text, "/");
    ASSERT_FALSE(r) << want;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << want << ": " << r.error().message;
    EXPECT_EQ(r.error().message.find(secret), std::string::npos) << "a token leaked: " << r.error().message;
  }
}

TEST(NamespaceFile, NameGrammarGenerated) {
  // Generated names: valid exactly when 1-63 of [a-z0-9_-] starting alphanumeric.
  std::mt19937 rng(30);
  const std::string alphabet = "abcz09_-A/. {}:";
  for (int i = 0; i < 2000; ++i) {
    std::string name(rng() % 66, 'x');
    for (auto& c : name) c = alphabet[rng() % alphabet.size()];
    bool want = !name.empty() && name.size() <= 63 && name.find_first_not_of("abcz09_-") == std::string::npos &&
                name[0] != '_' && name[0] != '-';
    EXPECT_EQ(valid_namespace_name(name), want) << name;
  }
}

struct AuthFixture : ::testing::Test {
  std::unique_ptr<Authorizer> auth;
  void SetUp() override {
    auto path = std::filesystem::temp_directory_path() / ("kcache-ns-" + std::to_string(::getpid()) + ".json");
    std::ofstream(path) << file_text();
    auto a = make_authorizer({"", false, false, false, path.string()});
    std::filesystem::remove(path);
    ASSERT_TRUE(a) << a.error().message;
    auth = std::move(*a);
  }
  AuthDecision ask(const std::string& token, const std::string& ns, Role role) const {
    Request r;
    r.peer_loopback = true;
    if (!token.empty()) r.headers.emplace_back("authorization", "Bearer " + token);
    if (!ns.empty()) r.headers.emplace_back("x-kcache-namespace", ns);
    return auth->authorize(r, role);
  }
};

TEST_F(AuthFixture, ATokenActsOnlyInItsNamespaces) {
  auto d = ask(k_a, "", Role::write);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.ns, "team-a");
  EXPECT_EQ(ask(k_a, "team-b", Role::read).status, 403);
  EXPECT_EQ(ask(k_a, "default", Role::read).status, 403);
  EXPECT_EQ(ask(k_a, "ghost", Role::read).status, 403);  // same answer as a foreign namespace
  EXPECT_EQ(ask(k_a, "team-a", Role::admin).status, 403);
  // A token in two namespaces must name one, and has each namespace's role there.
  EXPECT_EQ(ask(k_both, "", Role::read).status, 400);
  EXPECT_TRUE(ask(k_both, "team-b", Role::write).allowed);
  EXPECT_EQ(ask(k_both, "team-a", Role::write).status, 403);
  EXPECT_EQ(ask(k_both, "team-b", Role::write).ns, "team-b");
  // Unknown token: 401.
  EXPECT_EQ(ask("unknown-token-000000000", "", Role::read).status, 401);
  // Anonymous read where the namespace allows it, nowhere else.
  EXPECT_TRUE(ask("", "team-b", Role::read).allowed);
  EXPECT_EQ(ask("", "team-b", Role::write).status, 401);
  EXPECT_EQ(ask("", "team-a", Role::read).status, 401);
}

// RESP's AUTH <namespace> <token> asks with an AccessRequest; it resolves
// as the same token and X-Kcache-Namespace over HTTP.
TEST_F(AuthFixture, AnAccessRequestNamesItsNamespace) {
  for (const std::string& token : {k_a, k_b, k_both, std::string("unknown-token-000000000"), std::string()}) {
    for (const char* ns : {"", "team-a", "team-b", "ci", "default", "ghost"}) {
      for (Role role : {Role::read, Role::write, Role::admin}) {
        AccessRequest r;
        r.peer_loopback = true;
        if (!token.empty()) r.token = token;
        if (*ns) r.ns = ns;
        const auto got = auth->authorize(r, role);
        const auto want = ask(token, ns, role);
        EXPECT_EQ(got.allowed, want.allowed) << token << " in '" << ns << "'";
        EXPECT_EQ(got.status, want.status) << token << " in '" << ns << "'";
        EXPECT_EQ(got.ns, want.ns) << token << " in '" << ns << "'";
      }
    }
  }
}

TEST_F(AuthFixture, NamespacesOfListsWhereTheTokenHoldsTheRole) {
  Request r;
  r.headers.emplace_back("authorization", "Bearer " + k_both);
  auto reads = auth->namespaces_of(r, Role::read);
  std::sort(reads.begin(), reads.end());
  EXPECT_EQ(reads, (std::vector<std::string>{"team-a", "team-b"}));
  EXPECT_EQ(auth->namespaces_of(r, Role::write), std::vector<std::string>{"team-b"});
}

TEST(LoopbackNamespaces, TheHeaderPicksAnExistingNamespace) {
  auto path = std::filesystem::temp_directory_path() / ("kcache-ns-lo-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"namespaces": {"team-a": {}}})";
  auto a = make_authorizer({"", false, false, false, path.string()});
  std::filesystem::remove(path);
  ASSERT_TRUE(a);
  Request r;
  r.peer_loopback = true;
  EXPECT_EQ((*a)->authorize(r, Role::admin).ns, "default");
  r.headers.emplace_back("x-kcache-namespace", "team-a");
  EXPECT_EQ((*a)->authorize(r, Role::admin).ns, "team-a");
  r.headers.back().second = "team-z";
  EXPECT_EQ((*a)->authorize(r, Role::read).status, 403);
}

}  // namespace
}  // namespace kcache::server
