// RESP2 (and the little of RESP3 that HELLO 3 needs) wire format for the RESP listener (docs/protocol.md "RESP"): the
// request parser and the reply encoders. Pure functions, no I/O.
//
// Requests are arrays of bulk strings (what every client library sends) or
// inline commands (words separated by spaces, as typed into telnet). The
// parser looks at the front of a buffer and says complete (with the bytes
// it used), incomplete (read more) or error (reply with it and close: the
// stream cannot be resynchronised).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::server::resp {

struct Limits {
  std::size_t max_bulk_bytes = 512ull << 20;  // one argument (a value)
  std::size_t max_args = 1u << 20;            // arguments of one command
  std::size_t max_inline_bytes = 64u << 10;   // an inline command's line
};

enum class Parse { complete, incomplete, error };

struct Command {
  Parse status = Parse::incomplete;
  std::vector<std::string> args;  // complete: the command and its arguments
  std::size_t consumed = 0;       // complete: bytes of the input it used
  std::string error;              // error: the message for -ERR
};

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
