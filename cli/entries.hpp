// Reading the entry listing (GET /v1/entries) across pages, and turning a
// key prefix typed by a person into the one full key it names.
// Thread safety: as Api.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/api.hpp"

namespace kcache::cli {

struct EntryFilter {
  std::string label_prefix, target, mode, toolchain;
  std::string sort = "key";  // key, size, last_access, hits, created
  bool descending = false;
};

struct EntryPage {
  std::vector<nlohmann::json> entries;  // ENTRY objects as the server sends them
  bool truncated = false;               // stopped at `max` with more to come
};

// Follows next_cursor until the listing ends or `max` entries are in
// (0: no limit). The listing itself does not count as an access.
Result<EntryPage> list_entries(Api& api, const EntryFilter& filter, std::size_t max = 0);

// A full key as is; 6..63 lowercase hex digits as the prefix of exactly one
// stored key (Errc::not_found if none, invalid_argument if several or if
// the text is not hex).
Result<std::string> resolve_key(Api& api, const std::string& text);

}  // namespace kcache::cli
