#include "server/resp/resp_protocol.hpp"

#include <algorithm>
#include <charconv>

namespace kcache::server::resp {

namespace {

constexpr std::size_t npos = std::string::npos;

// Reads "<non-negative integer>\r\n" at in[pos] into v; advances pos.
Parse read_length(std::string_view in, std::size_t& pos, std::size_t& v) {
  const auto eol = in.find("\r\n", pos);
  // A length line is at most 32 bytes whether or not its CRLF has arrived
  // yet (the same verdict for any split of the stream; found by the fuzzer).
  if (eol == npos) {
    // A lone trailing '\r' may be the first half of the CRLF, not a digit
    // (a 10-minute fuzz run found 32 digits + '\r' refused only when split).
    std::size_t have = in.size() - pos;
    if (have > 0 && in.back() == '\r') --have;
    return have > 32 ? Parse::error : Parse::incomplete;
  }
  if (eol - pos > 32) return Parse::error;
  const char* first = in.data() + pos;
  const char* last = in.data() + eol;
  auto [p, ec] = std::from_chars(first, last, v);
  if (ec != std::errc{} || p != last || first == last) return Parse::error;
  pos = eol + 2;
  return Parse::complete;
}

}  // namespace

Limits small_limits(bool may_read) {
  Limits l;
  l.max_bulk_bytes = 16u << 10;  // Redis: 16 KiB per argument before AUTH
  l.max_args = may_read ? 4096 : 10;
  l.max_inline_bytes = 16u << 10;
  l.max_command_bytes = may_read ? (1u << 20) : (64u << 10);
  return l;
}

void Parser::feed(std::string_view bytes) {
  if (start_ > 0 && (start_ == buf_.size() || start_ >= (1u << 16))) {
    // Drop what earlier commands used; only the one in progress moves.
    buf_.erase(0, start_);
    pos_ -= start_;
    for (auto& s : spans_) s.first -= start_;
    start_ = 0;
  }
  buf_.append(bytes);
}

Command Parser::fail(std::string msg) {
  Command c;
  c.status = Parse::error;
  c.error = std::move(msg);
  return c;
}

Command Parser::complete(std::vector<std::string> args) {
  Command c;
  c.status = Parse::complete;
  c.args = std::move(args);
  c.consumed = pos_ - start_;
  start_ = pos_;
  have_count_ = have_bulk_ = false;
  nargs_ = bulk_ = declared_ = 0;
  spans_.clear();
  return c;
}

Command Parser::next_inline(const Limits& limits) {
  const auto eol = buf_.find('\n', pos_);
  if (eol == npos) {
    pos_ = buf_.size();  // no newline so far: look only at new bytes next time
    if (pending() > limits.max_inline_bytes) return fail("Protocol error: too big inline request");
    return {};
  }
  std::string_view line(buf_.data() + start_, eol - start_);
  if (line.size() > limits.max_inline_bytes) return fail("Protocol error: too big inline request");
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> args;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    if (line[i] == '"' || line[i] == '\'') return fail("Protocol error: quoted inline arguments are not supported");
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (args.size() == limits.max_args) return fail("Protocol error: too many inline arguments");
    args.emplace_back(line.substr(i, j - i));
    i = j;
  }
  pos_ = eol + 1;
  return complete(std::move(args));
}

Command Parser::next(const Limits& limits) {
  const std::string_view in(buf_);
  if (start_ == buf_.size()) return {};
  if (in[start_] != '*') return next_inline(limits);
  if (!have_count_) {
    std::size_t pos = start_ + 1;
    const Parse st = read_length(in, pos, nargs_);
    if (st == Parse::incomplete) return {};
    if (st == Parse::error || nargs_ > limits.max_args) return fail("Protocol error: invalid multibulk length");
    have_count_ = true;
    pos_ = pos;
    declared_ = pos_ - start_;
    spans_.reserve(std::min<std::size_t>(nargs_, 1024));
  }
  while (spans_.size() < nargs_) {
    if (!have_bulk_) {
      if (pos_ >= in.size()) return {};
      if (in[pos_] != '$') return fail(std::string("Protocol error: expected '$', got '") + in[pos_] + "'");
      std::size_t pos = pos_ + 1;
      const Parse st = read_length(in, pos, bulk_);
      if (st == Parse::incomplete) {
        if (pending() > limits.max_command_bytes) return fail("Protocol error: command too big");
        return {};
      }
      if (st == Parse::error || bulk_ > limits.max_bulk_bytes) return fail("Protocol error: invalid bulk length");
      have_bulk_ = true;
      pos_ = pos;
      declared_ = pos_ - start_ + bulk_ + 2;
      if (declared_ > limits.max_command_bytes) return fail("Protocol error: command too big");
    }
    if (in.size() - pos_ < bulk_ + 2) return {};
    if (in[pos_ + bulk_] != '\r' || in[pos_ + bulk_ + 1] != '\n') {
      return fail("Protocol error: bulk string not terminated by CRLF");
    }
    spans_.emplace_back(pos_, bulk_);
    pos_ += bulk_ + 2;
    have_bulk_ = false;
  }
  std::vector<std::string> args;
  args.reserve(spans_.size());
  for (const auto& [off, len] : spans_) args.emplace_back(in.substr(off, len));
  return complete(std::move(args));
}

Command parse_command(std::string_view in, const Limits& limits) {
  Parser p;
  p.feed(in);
  return p.next(limits);
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
