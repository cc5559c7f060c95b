// Key explanations for `kcache explain`: reading them from wherever they
// were written (a manifest, a miss record, a bare explanation) and showing
// a keys::diff so that the differing part of each value is visible.
// Thread safety: pure functions.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/explanation.hpp"

namespace kcache::cli {

// One side of a comparison: where it came from and what it says.
struct Side {
  std::string source;  // "stored entry 9f86…", "file miss.jsonl"
  keys::Explanation expl;
  // A miss-log record of kind "check_failure": the entry was found, but the
  // process refused it because its own checks failed (precompiled regions'
  // portable guard checks); each failure in words.
  std::vector<std::string> check_failures;
};

// Accepts an explanation object, or any object holding one under
// "explanation" (a bundle manifest, a miss-log record), as an object or as
// JSON text. Errc::invalid_argument naming `where` otherwise.
Result<keys::Explanation> explanation_from_json(const nlohmann::json& j, const std::string& where);

// A JSON file, or JSON lines (a miss log: the last record is used), as one
// side named "file PATH", with the record's check failures if it has any.
Result<Side> side_from_file(const std::string& path);

// Both sides of one field as short text, showing the neighbourhood of the
// first differing character when the values are long.
std::pair<std::string, std::string> contrast(const keys::FieldExplanation& left,
                                             const keys::FieldExplanation& right,
                                             std::size_t width);

nlohmann::json diff_to_json(const std::vector<keys::FieldDiff>& diffs);

// "FIELD  LEFT  RIGHT" table, or a line saying both name one key.
void print_diff(std::ostream& os, const Side& left, const Side& right,
                const std::vector<keys::FieldDiff>& diffs);

}  // namespace kcache::cli
