// Byte sizes as people write them, parsed one way for the server's options,
// the client's KCACHE_* variables and the CLI's flags (docs/operations.md).
//
// Grammar: a decimal number, optional spaces, then an optional unit K, M, G,
// T or P (binary: K = 1024), case-insensitive, optionally followed by "i"
// and/or "B": "4096", "64k", "500M", "1.5G", "2 GiB", "10gb", "1P". A
// fraction needs a unit ("1.5" alone is refused: bytes are whole); the
// result is rounded to the nearest byte. nullopt for anything else, and for
// a size of 2^64 bytes or more.
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kcache {

std::optional<std::uint64_t> parse_byte_size(std::string_view text);

}  // namespace kcache
