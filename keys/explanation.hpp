// Explanation: a key that can say what it was made of.
//
// A digest cannot be explained after the fact, so every key travels with an
// explanation: each field's own sub-hash (keys/cache_key.hpp), its size, and
// its value where that is short readable text. Two explanations can then be
// diffed to name exactly the fields that made two ranks miss each other.
// The explanation is stored in each bundle's manifest and in the client's
// miss log; `kcache explain` prints diffs.
//
// Thread safety: value types; all functions are pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/cache_key.hpp"

namespace kcache::keys {

// Values longer than this are represented by hash and size only.
inline constexpr std::size_t k_max_inline_value = 16 * 1024;

struct FieldExplanation {
  std::string hash;        // field_hash_hex(field, value)
  std::uint64_t size = 0;  // value bytes
  std::string value;       // the value when short printable text, else ""
  std::string detail;      // optional caller summary (e.g. a region's op counts)
};

struct Explanation {
  std::string key;    // 64 hex
  std::string label;  // readable label
  std::map<std::string, FieldExplanation> fields;  // by field_name()

  nlohmann::json to_json() const;
  // Errc::invalid_argument on any missing or mistyped member.
  static Result<Explanation> from_json(const nlohmann::json& j);
};

// Computes the key and its explanation together. `details` maps field names
// to optional summaries. Fails like compute_key(), or on a bad label.
Result<Explanation> explain(const KeyFields& fields, const std::string& label,
                            const std::map<std::string, std::string>& details = {});

// One differing field: its name and both sides' sub-hashes and values.
struct FieldDiff {
  std::string field;
  FieldExplanation left;
  FieldExplanation right;
};

// The fields whose sub-hashes differ, in key order; a field present on only
// one side counts as differing. Empty means both explanations name one key.
std::vector<FieldDiff> diff(const Explanation& left, const Explanation& right);

}  // namespace kcache::keys
