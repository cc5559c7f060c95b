// Byte sizes and durations as people write them, parsed one way for the
// server's options, the client's KCACHE_* variables and the CLI's flags
// (docs/operations.md).
//
// Sizes:
// Grammar: a decimal number, optional spaces, then an optional unit K, M, G,
// T or P (binary: K = 1024), case-insensitive, optionally followed by "i"
// and/or "B": "4096", "64k", "500M", "1.5G", "2 GiB", "10gb", "1P". A
// fraction needs a unit ("1.5" alone is refused: bytes are whole); the
// result is rounded to the nearest byte. nullopt for anything else, and for
// a size of 2^64 bytes or more.
//
// Durations: one or more <number><unit> parts, largest first or not,
// added up: "90s", "3h12m", "1.5h", "250ms", "2w"; units ms, s, m (or
// min), h, d, w. A bare number is in the caller's unit (milliseconds for
// the *_ms options and KCACHE_*_MS variables, seconds for the CLI's
// --older-than) and must stand alone ("3h12" is refused). nullopt for
// anything else and for a negative or absurd (over 100 years) duration.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kcache {

std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// Seconds; a bare number is `bare_unit_seconds` each.
std::optional<double> parse_duration_seconds(std::string_view text, double bare_unit_seconds);
// Whole milliseconds (rounded); a bare number is milliseconds.
std::optional<std::uint64_t> parse_duration_ms(std::string_view text);

}  // namespace kcache
