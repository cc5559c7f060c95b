// Human units: sizes in binary units (KiB…TiB), durations like 3h12m, and
// their parsers for --max-bytes 20G and --older-than 7d.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kcache::cli {

// "0 B", "512 B", "1.5 KiB", "20.0 GiB".
std::string format_bytes(std::uint64_t bytes);

// "850ms", "4.2s", "59s", "3m12s", "3h12m", "2d3h". Negative is clamped to 0.
std::string format_duration(double seconds);

// "3h12m ago" from a Unix-epoch time in ms; "never" for 0.
std::string format_ago(std::int64_t unix_ms, std::int64_t now_ms);

// "2026-01-01 12:00:00 UTC".
std::string format_utc(std::int64_t unix_ms);

// "71.4%".
std::string format_percent(double ratio);

std::int64_t now_unix_ms();

// kcache::parse_byte_size (common/units.hpp): "20G", "500M", "1.5GiB",
// "4096" (bytes); the server and the client accept the same spellings.
std::optional<std::uint64_t> parse_size(const std::string& text);

// kcache::parse_duration_seconds (common/units.hpp) with bare numbers in
// seconds: "7d", "12h", "3h12m", "90s", "2w", "45"; nullopt if bad.
std::optional<double> parse_duration(const std::string& text);

// At most `width` characters of `text` on one line (newlines shown as ⏎),
// ending in "…" when cut.
std::string one_line(const std::string& text, std::size_t width);

}  // namespace kcache::cli
