// Why did a recent miss miss? Once the region a GET missed is uploaded, its
// manifest carries the key's explanation (docs/keys.md); this compares it
// with the nearest entry stored in the same namespace — the most recently
// used one with the same label, else with the same region name (the label
// up to its first '/') — as `kcache explain` does, so the web page can show
// which key fields differed (docs/ui.md).
//
// Result, as JSON: {"label", "nearest": KEY | null, "differing": [{"field",
// "missed", "stored"}] | null, "note": TEXT}; values are cut to 160
// characters. Blocking (storage reads): call on the pool.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "storage/backend.hpp"

namespace kcache::server {

nlohmann::json explain_miss(storage::Backend& store, const std::string& key, const std::string& label,
                            const nlohmann::json& explanation);

}  // namespace kcache::server
