// The option table (server/config.hpp OptionSpec): its defaults are
// ServerConfig's, its names and environment variables follow one rule,
// --help and docs/operations.md list every option from it, and a value
// reaches the config from the command line, the environment and a file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/config.hpp"

namespace kcache::server {
namespace {

std::optional<ServerConfig> parse(std::vector<std::string> args, std::string* help = nullptr) {
  args.insert(args.begin(), "kcache-server");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_config(static_cast<int>(argv.size()), argv.data(), help);
}

TEST(ServerOptions, EachDefaultShownIsTheDefaultInForce) {
  for (const auto& o : server_options()) {
    if (!*o.default_text) continue;
    ServerConfig c;
    o.set(c, o.name, o.default_text);
    EXPECT_TRUE(c == ServerConfig{}) << "--" << o.name << " " << o.default_text << " is not the default";
  }
  EXPECT_TRUE(*parse({}) == [] {
    ServerConfig c;
    c.max_upload_bytes_in_flight = 2 * c.max_body_bytes;  // 0: twice --max-body-bytes
    return c;
  }());
}

TEST(ServerOptions, NamesAndEnvironmentFollowOneRule) {
  std::set<std::string> names;
  for (const auto& o : server_options()) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name << " twice";
    std::string env = "KCACHE_";
    for (const char* p = o.name; *p; ++p) env += *p == '-' ? '_' : static_cast<char>(std::toupper(*p));
    EXPECT_EQ(env, o.env);
    EXPECT_NE(std::string(o.help), "");
  }
}

TEST(ServerOptions, HelpAndTheOperationsPageListEveryOption) {
  std::string help;
  EXPECT_FALSE(parse({"--help"}, &help).has_value());
  for (const auto& o : server_options()) EXPECT_NE(help.find(std::string("--") + o.name), std::string::npos) << o.name;
  std::ifstream in(std::string(KCACHE_TEST_DATA_DIR) + "/../../../docs/operations.md");
  ASSERT_TRUE(in) << "docs/operations.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string page = ss.str();
  const std::string begin = "<!-- options: begin (kcache-server --options-markdown) -->\n", end = "<!-- options: end -->";
  auto b = page.find(begin), e = page.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(page.substr(b + begin.size(), e - b - begin.size()), options_markdown())
      << "regenerate with scripts/options_doc.sh";
}

TEST(ServerOptions, AValueReachesTheConfigFromEachSource) {
  EXPECT_EQ(parse({"--max-bytes", "1.5G"})->max_bytes, 3ull << 29);
  ::setenv("KCACHE_MAX_LEASES", "7", 1);
  EXPECT_EQ(parse({})->max_leases, 7u);
  EXPECT_EQ(parse({"--max-leases", "9"})->max_leases, 9u);  // the command line wins
  ::unsetenv("KCACHE_MAX_LEASES");
  const std::string file = ::testing::TempDir() + "/kcache-options-" + std::to_string(::getpid()) + ".conf";
  std::ofstream(file) << "resp-flight-prefixes = a:,b:\nanonymous-read = true\ntokens = /dev/null\n";
  auto c = parse({"--config", file});
  EXPECT_EQ(c->resp_flight_prefixes, (std::vector<std::string>{"a:", "b:"}));
  EXPECT_TRUE(c->anonymous_read);
  EXPECT_EQ(c->tokens_file, "/dev/null");
  std::ofstream(file) << "no-such-option = 1\n";
  EXPECT_THROW(parse({"--config", file}), ConfigError);
  EXPECT_THROW(parse({"--max-header-bytes", "10"}), ConfigError);
}

}  // namespace
}  // namespace kcache::server
