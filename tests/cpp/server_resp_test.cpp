// The RESP parser and encoders (server/resp_protocol.hpp) and the RESP
// keyspace (server/resp_keyspace.hpp).
#include <gtest/gtest.h>

#include <string>

#include "server/resp_keyspace.hpp"
#include "server/resp_protocol.hpp"

namespace kcache::server::resp {
namespace {

using namespace std::string_literals;

TEST(RespParse, ArrayOfBulkStrings) {
  const std::string wire = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\r\nb\0\r\n"s;
  auto c = parse_command(wire, {});
  ASSERT_EQ(c.status, Parse::complete) << c.error;
  EXPECT_EQ(c.consumed, wire.size());
  ASSERT_EQ(c.args.size(), 3u);
  EXPECT_EQ(c.args[0], "SET");
  EXPECT_EQ(c.args[2], "a\r\nb\0"s);  // binary-safe
}

TEST(RespParse, EveryPrefixOfACommandIsIncomplete) {
  const std::string wire = "*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n";
  for (std::size_t i = 0; i < wire.size(); ++i) {
    auto c = parse_command(std::string_view(wire).substr(0, i), {});
    EXPECT_EQ(c.status, Parse::incomplete) << "prefix of " << i << " bytes";
  }
  EXPECT_EQ(parse_command(wire, {}).status, Parse::complete);
}

TEST(RespParse, PipelinedCommandsOneAtATime) {
  const std::string wire = "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
  auto a = parse_command(wire, {});
  ASSERT_EQ(a.status, Parse::complete);
  auto b = parse_command(std::string_view(wire).substr(a.consumed), {});
  ASSERT_EQ(b.status, Parse::complete);
  EXPECT_EQ(b.args[0], "GET");
  EXPECT_EQ(a.consumed + b.consumed, wire.size());
}

TEST(RespParse, InlineCommands) {
  auto c = parse_command("SET  key   value\r\nGET", {});
  ASSERT_EQ(c.status, Parse::complete);
  EXPECT_EQ(c.args, (std::vector<std::string>{"SET", "key", "value"}));
  EXPECT_EQ(parse_command("GET key", {}).status, Parse::incomplete);
}

TEST(RespParse, MalformedInputIsAnErrorNotACrash) {
  for (const std::string bad : {"*x\r\n", "*-1\r\n", "*1\r\n:5\r\n", "*1\r\n$-1\r\n", "*1\r\n$abc\r\n",
                                "*1\r\n$3\r\nGETxx", "*99999999999999999999\r\n", "*1\r\n$99999999999999999999\r\n"}) {
    auto c = parse_command(bad, {});
    EXPECT_EQ(c.status, Parse::error) << bad;
    EXPECT_FALSE(c.error.empty());
  }
}

TEST(RespParse, LimitsAreEnforcedBeforeTheBytesArrive) {
  Limits l;
  l.max_bulk_bytes = 10;
  l.max_args = 2;
  EXPECT_EQ(parse_command("*2\r\n$3\r\nSET\r\n$11\r\n", l).status, Parse::error);  // no need to wait for 11 bytes
  EXPECT_EQ(parse_command("*3\r\n", l).status, Parse::error);
  l.max_inline_bytes = 8;
  EXPECT_EQ(parse_command("GET aaaaaaaaaaaaaaaaaa", l).status, Parse::error);
}

TEST(RespEncode, Values) {
  std::string out;
  simple(out, "OK");
  error(out, "ERR bad\r\nthing");
  integer(out, -3);
  bulk(out, "a\0b"s);
  null(out, 2);
  null(out, 3);
  array_header(out, 2);
  map_header(out, 2, 2);
  map_header(out, 2, 3);
  EXPECT_EQ(out, "+OK\r\n-ERR bad  thing\r\n:-3\r\n$3\r\na\0b\r\n$-1\r\n_\r\n*2\r\n*4\r\n%2\r\n"s);
}

TEST(RespKeyspace, OwnNamespaceAndCacheTypes) {
  const auto k = storage_key("pt2:fx-graph-v1::abc:c1");
  EXPECT_EQ(k.size(), 64u);
  EXPECT_NE(k, storage_key("pt2:fx-graph-v1::abc:c2"));
  EXPECT_EQ(cache_type("pt2:fx-graph-v1::abc:c1"), "pt2:fx-graph-v1");
  EXPECT_EQ(cache_type("pt2:autograd-experimental::x"), "pt2:autograd-experimental");
  EXPECT_EQ(cache_type("triton:abc:kernel.cubin"), "triton");
  EXPECT_EQ(cache_type("plain"), "other");
  EXPECT_EQ(cache_type("we\"ird\n:x"), "we_ird_");  // safe as a metric label
  auto m = entry_meta("pt2:fx-graph-v1::\x01"s);
  EXPECT_EQ(m.mode, "resp");
  EXPECT_EQ(m.target, "pt2:fx-graph-v1");
  EXPECT_EQ(m.label, "pt2:fx-graph-v1::?");
}

}  // namespace
}  // namespace kcache::server::resp
