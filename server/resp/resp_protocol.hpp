// RESP2 (and the little of RESP3 that HELLO 3 needs) wire format for the RESP listener (docs/protocol.md "RESP"): the
// request parser and the reply encoders. Pure functions, no I/O.
//
// Requests are arrays of bulk strings (what every client library sends) or
// inline commands (words separated by spaces, as typed into telnet). The
// parser says complete (with the bytes it used), incomplete (read more) or
// error (reply with it and close: the stream cannot be resynchronised).
// Every length is checked against the limits as soon as it is read, before
// its bytes arrive, and so is the command's running total.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::server::resp {

struct Limits {
  std::size_t max_bulk_bytes = 512ull << 20;  // one argument (a value)
  std::size_t max_args = 1u << 16;            // arguments of one command
  std::size_t max_inline_bytes = 64u << 10;   // an inline command's line
  // Every byte of one command (headers included) the connection may hold
  // before it is complete: what one client can make the server buffer.
  std::size_t max_command_bytes = (512ull << 20) + (1u << 20);
};

// Before a connection may write (no AUTH yet, or a read-only token), it
// sends small commands only, as Redis does for unauthenticated clients.
Limits small_limits(bool may_read);

enum class Parse { complete, incomplete, error };

struct Command {
  Parse status = Parse::incomplete;
  std::vector<std::string> args;  // complete: the command and its arguments
  std::size_t consumed = 0;       // complete: bytes of the input it used
  std::string error;              // error: the message for -ERR
};

// An incremental parser: bytes are fed as they arrive; next() resumes where
// it stopped (a header or argument already read is never read again) and
// copies an argument's bytes only once its command is complete.
class Parser {
 public:
  void feed(std::string_view bytes);
  // The next complete command, incomplete (feed more), or an error (the
  // stream cannot be resynchronised: reply and close).
  Command next(const Limits& limits);
  // Bytes of the command in progress held so far (0: none started).
  std::size_t pending() const { return buf_.size() - start_; }
  // What the command in progress has announced so far: its header, the
  // arguments read, and the length of the one being read.
  std::size_t declared() const { return declared_; }

 private:
  Command fail(std::string msg);
  Command complete(std::vector<std::string> args);
  Command next_inline(const Limits& limits);

  std::string buf_;
  std::size_t start_ = 0;      // first byte of the command in progress
  std::size_t pos_ = 0;        // where parsing resumes
  std::size_t nargs_ = 0;      // the command's argument count, once read
  bool have_count_ = false;
  std::size_t bulk_ = 0;       // the argument being read: its length, once read
  bool have_bulk_ = false;
  std::size_t declared_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> spans_;  // arguments read: offset, length
};

// One command from the front of `in` (a Parser fed `in` once).
Command parse_command(std::string_view in, const Limits& limits);

// Reply encoders: each appends one RESP2 value to `out`.
void simple(std::string& out, std::string_view s);  // +s  (s has no CR/LF)
void error(std::string& out, std::string_view s);   // -s  (s starts with ERR, NOAUTH, …)
void integer(std::string& out, long long v);
void bulk(std::string& out, std::string_view s);
// A null: "$-1" in RESP2, "_" in RESP3.
void null(std::string& out, int proto);
void array_header(std::string& out, std::size_t n);
// A map of n pairs: "%n" in RESP3, a flat array of 2n in RESP2.
void map_header(std::string& out, std::size_t n, int proto);

}  // namespace kcache::server::resp
