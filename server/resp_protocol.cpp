#include "server/resp_protocol.hpp"

#include <algorithm>
#include <charconv>

namespace kcache::server::resp {

namespace {

// Reads "<non-negative integer>\r\n" at in[pos] into v; advances pos.
Parse read_length(std::string_view in, std::size_t& pos, std::size_t& v) {
  const auto eol = in.find("\r\n", pos);
  if (eol == std::string_view::npos) return in.size() - pos > 32 ? Parse::error : Parse::incomplete;
  const char* first = in.data() + pos;
  const char* last = in.data() + eol;
  auto [p, ec] = std::from_chars(first, last, v);
  if (ec != std::errc{} || p != last || first == last) return Parse::error;
  pos = eol + 2;
  return Parse::complete;
}

Command fail(std::string msg) {
  Command c;
  c.status = Parse::error;
  c.error = std::move(msg);
  return c;
}

Command parse_inline(std::string_view in, const Limits& limits) {
  const auto eol = in.find('\n');
  if (eol == std::string_view::npos) {
    if (in.size() > limits.max_inline_bytes) return fail("Protocol error: too big inline request");
    return {};
  }
  std::string_view line = in.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  Command c;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    if (line[i] == '"' || line[i] == '\'') return fail("Protocol error: quoted inline arguments are not supported");
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    c.args.emplace_back(line.substr(i, j - i));
    i = j;
  }
  c.status = Parse::complete;
  c.consumed = eol + 1;
  return c;
}

}  // namespace

Command parse_command(std::string_view in, const Limits& limits) {
  if (in.empty()) return {};
  if (in[0] != '*') return parse_inline(in, limits);
  std::size_t pos = 1;
  std::size_t n = 0;
  Parse st = read_length(in, pos, n);
  if (st == Parse::incomplete) return {};
  if (st == Parse::error || n > limits.max_args) return fail("Protocol error: invalid multibulk length");
  Command c;
  c.args.reserve(std::min<std::size_t>(n, 1024));
  for (std::size_t i = 0; i < n; ++i) {
    if (pos >= in.size()) return {};
    if (in[pos] != '$') return fail(std::string("Protocol error: expected '$', got '") + in[pos] + "'");
    ++pos;
    std::size_t len = 0;
    st = read_length(in, pos, len);
    if (st == Parse::incomplete) return {};
    if (st == Parse::error || len > limits.max_bulk_bytes) return fail("Protocol error: invalid bulk length");
    const auto need = len + 2;
    if (in.size() - pos < need) return {};
    if (in[pos + len] != '\r' || in[pos + len + 1] != '\n') return fail("Protocol error: bulk string not terminated by CRLF");
    c.args.emplace_back(in.substr(pos, len));
    pos += need;
  }
  c.status = Parse::complete;
  c.consumed = pos;
  return c;
}

void simple(std::string& out, std::string_view s) {
  out += '+';
  out += s;
  out += "\r\n";
}

void error(std::string& out, std::string_view s) {
  out += '-';
  for (char ch : s) out += (ch == '\r' || ch == '\n') ? ' ' : ch;
  out += "\r\n";
}

void integer(std::string& out, long long v) {
  out += ':';
  out += std::to_string(v);
  out += "\r\n";
}

void bulk(std::string& out, std::string_view s) {
  out += '$';
  out += std::to_string(s.size());
  out += "\r\n";
  out += s;
  out += "\r\n";
}

void null(std::string& out, int proto) { out += proto == 3 ? "_\r\n" : "$-1\r\n"; }

void map_header(std::string& out, std::size_t n, int proto) {
  out += proto == 3 ? '%' : '*';
  out += std::to_string(proto == 3 ? n : 2 * n);
  out += "\r\n";
}

void array_header(std::string& out, std::size_t n) {
  out += '*';
  out += std::to_string(n);
  out += "\r\n";
}

}  // namespace kcache::server::resp
