#include "cli/explain_view.hpp"

#include <fstream>
#include <sstream>

#include "cli/context.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

constexpr std::size_t k_context = 24;  // characters shown before a difference

std::string describe(const keys::FieldExplanation& f, const std::string& value) {
  if (f.hash.empty()) return "(absent)";
  if (!value.empty()) return value;
  return "hash " + f.hash.substr(0, 12) + " (" + format_bytes(f.size) + ", not inline)";
}

json field_json(const keys::FieldExplanation& f) {
  if (f.hash.empty()) return nullptr;
  json j = {{"hash", f.hash}, {"size", f.size}};
  if (!f.value.empty()) j["value"] = f.value;
  if (!f.detail.empty()) j["detail"] = f.detail;
  return j;
}

}  // namespace

Result<keys::Explanation> explanation_from_json(const json& j, const std::string& where) {
  const json* e = &j;
  json parsed;
  if (j.is_object() && !j.contains("fields") && j.contains("explanation")) {
    e = &j["explanation"];
    if (e->is_string()) {
      parsed = json::parse(e->get<std::string>(), nullptr, false);
      e = &parsed;
    }
  }
  auto out = keys::Explanation::from_json(*e);
  if (!out) return usage_error(where + ": not a key explanation (" + out.error().message + ")");
  return out;
}

Result<Side> side_from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return usage_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {  // JSON lines: the last non-empty record
    std::istringstream lines(text);
    std::string line, last;
    while (std::getline(lines, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    }
    j = json::parse(last, nullptr, false);
    if (j.is_discarded()) return usage_error(path + " is neither JSON nor JSON lines");
  }
  auto expl = explanation_from_json(j, path);
  if (!expl) return expl.error();
  Side side{"file " + path, std::move(*expl), {}};
  if (j.is_object() && j.contains("check_failures") && j["check_failures"].is_array()) {
    for (const auto& f : j["check_failures"]) {
      if (f.is_string()) side.check_failures.push_back(f.get<std::string>());
    }
  }
  return side;
}

std::pair<std::string, std::string> contrast(const keys::FieldExplanation& left,
                                             const keys::FieldExplanation& right,
                                             std::size_t width) {
  const std::string& a = left.value;
  const std::string& b = right.value;
  if (a.empty() || b.empty() || (a.size() <= width && b.size() <= width)) {
    return {describe(left, one_line(a, width)), describe(right, one_line(b, width))};
  }
  std::size_t p = 0;
  while (p < a.size() && p < b.size() && a[p] == b[p]) ++p;
  const std::size_t start = p > k_context ? p - k_context : 0;
  auto cut = [&](const std::string& s) {
    std::string piece = start < s.size() ? s.substr(start) : "";
    return (start > 0 ? "…" : "") + one_line(piece, width);
  };
  return {cut(a), cut(b)};
}

json diff_to_json(const std::vector<keys::FieldDiff>& diffs) {
  json out = json::array();
  for (const auto& d : diffs)
    out.push_back(
        {{"field", d.field}, {"left", field_json(d.left)}, {"right", field_json(d.right)}});
  return out;
}

void print_diff(std::ostream& os, const Side& left, const Side& right,
                const std::vector<keys::FieldDiff>& diffs) {
  print_fields(os,
               {{"left", left.expl.key + "  " + left.expl.label + "  (" + left.source + ")"},
                {"right", right.expl.key + "  " + right.expl.label + "  (" + right.source + ")"}});
  if (diffs.empty()) {
    os << "\nno key field differs: both sides name key " << left.expl.key << '\n';
    return;
  }
  std::size_t fields = left.expl.fields.size();
  for (const auto& [name, _] : right.expl.fields) fields += left.expl.fields.count(name) ? 0 : 1;
  os << '\n' << diffs.size() << " of " << fields << " key fields differ:\n";
  Table t({"FIELD", "LEFT", "RIGHT"});
  for (const auto& d : diffs) {
    auto [l, r] = contrast(d.left, d.right, 60);
    t.add({d.field, l, r});
  }
  t.print(os, "  ");
}

}  // namespace kcache::cli
