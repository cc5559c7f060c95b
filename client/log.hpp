// The client's stderr log: one line per event, "kcache: <level>: <text>".
//
// Contract: never called with a secret in the text (tokens and keys are
// logged as "<set>" by their owners). Writes are one write(2) each, so lines
// from concurrent threads and ranks never interleave.
// Thread safety: all functions may be called concurrently.
#pragma once

#include <string_view>

namespace kcache::client {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

// Unknown names leave the level unchanged and return false.
bool set_log_level(std::string_view name);
bool log_enabled(LogLevel level);
void log(LogLevel level, std::string_view text);

}  // namespace kcache::client
