// parse_http_url (common/http_url.hpp): the one grammar of kcache-server
// URLs behind the client's KCACHE_URL and the CLI's --server.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "client/http_client.hpp"
#include "common/http_url.hpp"

namespace kcache {
namespace {

struct Want {
  bool tls;
  std::string host, port, prefix, host_header;
};

TEST(HttpUrl, TheGrammar) {
  const std::vector<std::pair<std::string, std::optional<Want>>> cases = {
      {"http://127.0.0.1:8420", Want{false, "127.0.0.1", "8420", "", "127.0.0.1:8420"}},
      {"https://cache.example/kcache/", Want{true, "cache.example", "443", "/kcache", "cache.example"}},
      {"http://[::1]:9000", Want{false, "::1", "9000", "", "[::1]:9000"}},
      {"http://h", Want{false, "h", "80", "", "h"}},
      {"h:81", Want{false, "h", "81", "", "h:81"}},  // bare host:port: http
      {"ftp://x", std::nullopt},
      {"http://", std::nullopt},
      {"http://host:port", std::nullopt},
      {"http://user:pw@host", std::nullopt},
      {"http://[::1", std::nullopt},
      {"http://[::1]x", std::nullopt},
      {"http://h:123456", std::nullopt},
  };
  for (const auto& [text, want] : cases) {
    auto u = parse_http_url(text);
    auto c = client::Url::parse(text);  // the client's KCACHE_URL is this grammar
    ASSERT_EQ(u.ok(), want.has_value()) << text;
    ASSERT_EQ(c.ok(), want.has_value()) << text;
    if (!want) {
      EXPECT_EQ(u.error().code, Errc::invalid_argument);
      continue;
    }
    EXPECT_EQ(u->tls, want->tls) << text;
    EXPECT_EQ(u->host, want->host) << text;
    EXPECT_EQ(u->port, want->port) << text;
    EXPECT_EQ(u->prefix, want->prefix) << text;
    EXPECT_EQ(u->host_header(), want->host_header) << text;
    EXPECT_EQ(c->host_header(), want->host_header) << text;
  }
  EXPECT_EQ(parse_http_url("http://user:pw@host").error().message.find("pw"), std::string::npos);
}

}  // namespace
}  // namespace kcache
