// kcache::parse_byte_size (common/units.hpp): one grammar of byte sizes, and
// the server's and the client's parsers answer exactly as it does (the CLI's
// parse_size calls the same function; cli/units.cpp).
#include "common/units.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/config.hpp"
#include "server/config.hpp"

namespace kcache {
namespace {

const std::vector<std::pair<std::string, std::optional<std::uint64_t>>>& spellings() {
  static const std::vector<std::pair<std::string, std::optional<std::uint64_t>>> table = {
      {"0", 0},
      {"4096", 4096},
      {" 4096 ", 4096},
      {"18446744073709551615", 18446744073709551615ull},
      {"18446744073709551616", std::nullopt},
      {"99999999999999999999", std::nullopt},
      {"512B", 512},
      {"64k", 64ull << 10},
      {"1K", 1024},
      {"1KiB", 1024},
      {"500M", 500ull << 20},
      {"500 MB", 500ull << 20},
      {"10G", 10ull << 30},
      {"10gb", 10ull << 30},
      {"2 GiB", 2ull << 30},
      {"1.5G", 3ull << 29},
      {"1.5GiB", 3ull << 29},
      {"0.5k", 512},
      {"2T", 2ull << 40},
      {"1P", 1ull << 50},
      {"1pib", 1ull << 50},
      {"16383P", 16383ull << 50},
      {"16384P", std::nullopt},  // 2^64
      {"", std::nullopt},
      {"G", std::nullopt},
      {"lots", std::nullopt},
      {"1.2.3", std::nullopt},
      {".5G", std::nullopt},
      {"5.G", std::nullopt},
      {"-5", std::nullopt},
      {"5X", std::nullopt},
      {"5 E", std::nullopt},
      {"1.5", std::nullopt},  // a fraction of a byte
      {"1.5B", std::nullopt},
      {"10 G B", std::nullopt},
      {"1e3", std::nullopt},
      {std::string(400, '9') + "G", std::nullopt},  // past a double: refused, not thrown
      {std::string(400, '9'), std::nullopt},
  };
  return table;
}

TEST(ByteSize, TheGrammar) {
  for (const auto& [text, want] : spellings()) EXPECT_EQ(parse_byte_size(text), want) << "'" << text << "'";
}

TEST(ByteSize, TheServerAndTheClientAcceptTheSameSpellings) {
  for (const auto& [text, want] : spellings()) {
    EXPECT_EQ(server::parse_size(text), want) << "server: '" << text << "'";
    auto client = parse_size(text);
    EXPECT_EQ(client.ok(), want.has_value()) << "client: '" << text << "'";
    if (client.ok() && want) {
      EXPECT_EQ(*client, *want) << "client: '" << text << "'";
    }
  }
  auto bad = parse_size("lots");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bad size 'lots'"), std::string::npos) << bad.error().message;
}

// Durations (common/units.hpp): bare numbers in the caller's unit, parts
// added up, anything else refused.
const std::vector<std::pair<std::string, std::optional<std::uint64_t>>>& durations_ms() {
  static const std::vector<std::pair<std::string, std::optional<std::uint64_t>>> table = {
      {"0", 0},         {"1500", 1500},      {"250ms", 250},   {"1.5s", 1500},  {"90s", 90'000},
      {"2m", 120'000},  {"2min", 120'000},   {"1h", 3'600'000}, {"3h12m", 11'520'000},
      {"1d", 86'400'000}, {"1w", 604'800'000}, {"1m30s", 90'000}, {"", std::nullopt},
      {"soon", std::nullopt}, {"3h12", std::nullopt}, {"1.2.3s", std::nullopt}, {"-5s", std::nullopt},
      {"5 s", std::nullopt}, {"10y", std::nullopt}, {"999999999w", std::nullopt}, {".", std::nullopt},
  };
  return table;
}

TEST(Duration, TheGrammar) {
  for (const auto& [text, want] : durations_ms()) EXPECT_EQ(parse_duration_ms(text), want) << "'" << text << "'";
  EXPECT_EQ(parse_duration_seconds("45", 1.0), 45.0);  // the CLI's bare unit
  EXPECT_EQ(parse_duration_seconds("45", 0.001), 0.045);
}

// The server's *-ms options and the client's KCACHE_*_MS variables take
// the same spellings (within their ranges).
TEST(Duration, TheServerAndTheClientAcceptTheSameSpellings) {
  for (const auto& [text, want] : durations_ms()) {
    if (want && *want > 3'600'000) continue;  // past --read-timeout-ms's range
    if (text.empty()) continue;  // empty is "unset" there: the default
    std::vector<std::string> args = {"kcache-server", "--read-timeout-ms", text};
    std::vector<const char*> argv;
    for (auto& a : args) argv.push_back(a.c_str());
    std::optional<std::uint64_t> server;
    try {
      server = server::parse_config(3, argv.data(), nullptr)->read_timeout_ms;
    } catch (const server::ConfigError&) {
    }
    // 0 is refused by the server as a timeout, not as a spelling.
    if (want != std::optional<std::uint64_t>(0)) {
      EXPECT_EQ(server, want) << "server: '" << text << "'";
    }
    auto client = ClientConfig::from_env([&](const char* name) -> const char* {
      return std::string(name) == "KCACHE_REQUEST_TIMEOUT_MS" ? text.c_str() : nullptr;
    });
    EXPECT_EQ(client.ok(), want.has_value()) << "client: '" << text << "'";
    if (client.ok() && want) {
      EXPECT_EQ(static_cast<std::uint64_t>(client->request_timeout_ms), *want) << text;
    }
  }
}

}  // namespace
}  // namespace kcache
