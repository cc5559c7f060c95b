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
    if (client.ok() && want) EXPECT_EQ(*client, *want) << "client: '" << text << "'";
  }
  auto bad = parse_size("lots");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bad size 'lots'"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace kcache
