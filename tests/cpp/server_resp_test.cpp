// The RESP parser and encoders (server/resp/resp_protocol.hpp) and the RESP
// keyspace (server/resp/resp_keyspace.hpp).
#include <gtest/gtest.h>

#include <string>

#include "server/resp/resp_keyspace.hpp"
#include "server/resp/resp_protocol.hpp"

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

TEST(RespParser, ByteByByteGivesTheSameCommandsAsAllAtOnce) {
  const std::string wire = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\r\nb\0\r\nPING x\r\n*1\r\n$4\r\nQUIT\r\n"s;
  Parser p;
  std::vector<std::vector<std::string>> got;
  for (char ch : wire) {
    p.feed(std::string_view(&ch, 1));
    for (auto c = p.next({}); c.status == Parse::complete; c = p.next({})) got.push_back(c.args);
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (std::vector<std::string>{"SET", "k", "a\r\nb\0"s}));
  EXPECT_EQ(got[1], (std::vector<std::string>{"PING", "x"}));
  EXPECT_EQ(got[2], (std::vector<std::string>{"QUIT"}));
  EXPECT_EQ(p.pending(), 0u);
}

TEST(RespParser, ALengthLineOf32DigitsIsTheSameWholeOrSplitBeforeItsLf) {
  // 32 digits is the longest length line; its '\r' arriving before its '\n'
  // must not count as a 33rd byte (found by a 10-minute fuzz run).
  const std::string wire = "*1\r\n$" + std::string(31, '0') + "4\r\nPING\r\n";
  auto whole = parse_command(wire, {});
  ASSERT_EQ(whole.status, Parse::complete) << whole.error;
  Parser p;
  const auto lf = wire.find('\n', 5);
  p.feed(std::string_view(wire).substr(0, lf));  // up to and including the '\r'
  EXPECT_EQ(p.next({}).status, Parse::incomplete);
  p.feed(std::string_view(wire).substr(lf));
  auto c = p.next({});
  ASSERT_EQ(c.status, Parse::complete) << c.error;
  EXPECT_EQ(c.args, whole.args);
  Parser q;  // 33 digits stay an error however they arrive
  q.feed("*1\r\n$" + std::string(33, '0') + "\r");
  EXPECT_EQ(q.next({}).status, Parse::error);
}

TEST(RespParser, DeclaredBytesAndTheCommandCap) {
  Limits l;
  l.max_command_bytes = 1000;
  Parser p;
  p.feed("*2\r\n$3\r\nSET\r\n$500\r\nxx");
  EXPECT_EQ(p.next(l).status, Parse::incomplete);
  EXPECT_EQ(p.declared(), 4u + 9u + 6u + 502u);  // through the argument being read
  Parser q;
  q.feed("*3\r\n$3\r\nSET\r\n$600\r\n" + std::string(600, 'v') + "\r\n$600\r\n");
  auto c = q.next(l);
  EXPECT_EQ(c.status, Parse::error);  // 1200 bytes declared: refused before they arrive
  EXPECT_EQ(c.error, "Protocol error: command too big");
}

TEST(RespParser, SmallLimitsBeforeAuth) {
  const Limits anon = small_limits(false);
  const Limits reader = small_limits(true);
  EXPECT_EQ(parse_command("*11\r\n", anon).status, Parse::error);
  EXPECT_EQ(parse_command("*11\r\n", reader).status, Parse::incomplete);
  EXPECT_EQ(parse_command("*2\r\n$3\r\nGET\r\n$16385\r\n", reader).status, Parse::error);
  EXPECT_EQ(parse_command("*2\r\n$3\r\nGET\r\n$16384\r\n", reader).status, Parse::incomplete);
  EXPECT_EQ(parse_command("*1048576\r\n", Limits{}).status, Parse::error);  // 65536 arguments at most
}

TEST(RespParser, KeepsPositionAcrossCompactions) {
  // Many small commands, then one spanning reads: the consumed prefix is
  // dropped between reads and the command in progress survives it.
  Parser p;
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "*1\r\n$4\r\nPING\r\n";
  p.feed(many + "*2\r\n$3\r\nGET\r\n$3\r\nab");
  int n = 0;
  for (auto c = p.next({}); c.status == Parse::complete; c = p.next({})) ++n;
  EXPECT_EQ(n, 5000);
  p.feed("c\r\n");
  auto c = p.next({});
  ASSERT_EQ(c.status, Parse::complete);
  EXPECT_EQ(c.args, (std::vector<std::string>{"GET", "abc"}));
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
  EXPECT_EQ(cache_type("we\"ird\n:x"), "other");  // a fixed set: no label from client bytes
  EXPECT_EQ(cache_type("pt2:" + std::string(64, 'a') + "::k:c1"), "pt2:autotune");
  EXPECT_EQ(cache_type("pt2:made-up-family::k"), "pt2:other");
  EXPECT_EQ(cache_type("pt2:bundled-autotune-v1::k:c1"), "pt2:bundled-autotune-v1");
  auto m = entry_meta("pt2:fx-graph-v1::\x01"s);
  EXPECT_EQ(m.mode, "resp");
  EXPECT_EQ(m.target, "pt2:fx-graph-v1");
  EXPECT_EQ(m.label, "pt2:fx-graph-v1::?");
}

}  // namespace
}  // namespace kcache::server::resp
