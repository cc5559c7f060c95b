// kcache explain: why did a lookup miss?
//
//   explain KEY1 KEY2                 diff two stored entries' key fields
//   explain --file a.json --file b.json  (or KEY --file x.json) diff two explanations
//   explain --file miss.json          find stored entries with the same label
//                                     (else the same region name) and diff each
//
// Fetching a stored entry's manifest counts as an access on the server
// (hits, last access), as any read does.
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/entries.hpp"
#include "cli/explain_view.hpp"
#include "cli/table.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

// Candidates diffed at most when searching by label.
constexpr std::size_t k_max_candidates = 20;

struct ExplainOptions {
  std::vector<std::string> keys;
  std::vector<std::string> files;
};

Result<Side> stored_side(Api& api, const std::string& text) {
  auto key = resolve_key(api, text);
  if (!key) return key.error();
  auto body = api.call_json("GET", "/v1/entries/" + *key, Role::read, "entry " + *key);
  if (!body) return body.error();
  const json& manifest = (*body)["manifest"];
  if (!manifest.is_object() || !manifest.contains("explanation")) {
    return make_error(Errc::corrupt,
                      "stored entry " + *key + " carries no key explanation in its manifest");
  }
  auto expl = explanation_from_json(manifest, "stored entry " + *key);
  if (!expl) return make_error(Errc::corrupt, expl.error().message);
  // An entry this namespace reads through to another (docs/namespaces.md).
  std::string source = "stored entry";
  if (body->value("read_through", false)) {
    source += " in namespace " + body->value("namespace", "?") + ", read through";
  }
  return Side{source, std::move(*expl), {}};
}

json side_json(const Side& s) {
  return {{"key", s.expl.key},
          {"label", s.expl.label},
          {"source", s.source},
          {"check_failures", s.check_failures}};
}

// A check-failure record: the lookup found the entry, the process refused it.
void print_check_failures(std::ostream& os, const Side& subject) {
  if (subject.check_failures.empty()) return;
  os << "found, but not used: the process's checks of the stored entry failed (it took the traced "
        "path instead):\n";
  for (const auto& f : subject.check_failures) os << "  " << f << '\n';
}

Status compare_two(const Context& ctx, const Side& left, const Side& right) {
  auto diffs = keys::diff(left.expl, right.expl);
  if (ctx.json) {
    std::cout << json{{"left", side_json(left)},
                      {"right", side_json(right)},
                      {"same_key", diffs.empty()},
                      {"differing", diff_to_json(diffs)}}
                     .dump(2)
              << '\n';
  } else {
    print_check_failures(std::cout, left);
    print_check_failures(std::cout, right);
    print_diff(std::cout, left, right, diffs);
  }
  return Ok{};
}

// Stored entries to compare `subject` with: same label, else same region name.
Result<std::vector<json>> candidates_for(Api& api, const keys::Explanation& subject,
                                         bool* subject_stored) {
  const std::string& label = subject.label;
  const std::string region = label.substr(0, label.find('/')) + "/";
  for (const std::string& prefix : {label, region}) {
    auto page = list_entries(api, EntryFilter{prefix, "", "", "", "last_access", true});
    if (!page) return page.error();
    std::vector<json> out;
    for (const auto& e : page->entries) {
      if (e.value("key", "") == subject.key) {
        *subject_stored = true;
        continue;
      }
      if (prefix == label && e.value("label", "") != label) continue;
      if (out.size() < k_max_candidates) out.push_back(e);
    }
    if (!out.empty() || *subject_stored) return out;
  }
  return std::vector<json>{};
}

Status search(const Context& ctx, Api& api, const Side& subject) {
  bool stored = false;
  auto found = candidates_for(api, subject.expl, &stored);
  if (!found) return found.error();
  // Not in this namespace: a namespace it reads through to may hold it.
  std::string through;
  if (!stored) {
    auto r = api.raw("GET", "/v1/entries/" + subject.expl.key);
    if (r && r->status == 200) {
      auto j = json::parse(r->body, nullptr, false);
      if (j.is_object() && j.value("read_through", false)) through = j.value("namespace", "?");
    }
  }
  if (found->empty() && !stored && through.empty()) {
    return make_error(Errc::not_found,
                      "no stored entry on " + api.url() + " has the label " + subject.expl.label +
                          " or its region name; nothing to compare with (`kcache ls`)");
  }
  struct Match {
    Side side;
    std::vector<keys::FieldDiff> diffs;
  };
  std::vector<Match> matches;
  for (const auto& e : *found) {
    auto side = stored_side(api, e.value("key", ""));
    if (!side) continue;  // evicted meanwhile, or no explanation
    auto diffs = keys::diff(subject.expl, side->expl);
    matches.push_back({std::move(*side), std::move(diffs)});
  }
  std::stable_sort(matches.begin(), matches.end(),
                   [](const Match& a, const Match& b) { return a.diffs.size() < b.diffs.size(); });
  if (ctx.json) {
    json c = json::array();
    for (const auto& m : matches)
      c.push_back({{"key", m.side.expl.key},
                   {"label", m.side.expl.label},
                   {"differing", diff_to_json(m.diffs)}});
    std::cout << json{{"subject", side_json(subject)},
                      {"subject_stored", stored},
                      {"subject_read_through", through.empty() ? json(nullptr) : json(through)},
                      {"candidates", c}}
                     .dump(2)
              << '\n';
    return Ok{};
  }
  std::cout << "subject  " << subject.expl.key << "  " << subject.expl.label << "  ("
            << subject.source << ")\n";
  print_check_failures(std::cout, subject);
  if (stored) std::cout << "this key is stored now: a lookup for it hits\n";
  if (!through.empty()) {
    std::cout << "this key is stored now in namespace " << through
              << ", which this namespace reads through: a lookup for it hits there\n";
  }
  if (matches.empty()) return Ok{};
  std::cout << '\n'
            << matches.size() << " stored entr" << (matches.size() == 1 ? "y" : "ies")
            << " to compare with:\n";
  Table t({"KEY", "LABEL", "DIFFERING FIELDS"});
  for (const auto& m : matches) {
    std::string names;
    for (const auto& d : m.diffs) names += (names.empty() ? "" : ", ") + d.field;
    t.add({m.side.expl.key.substr(0, 12), m.side.expl.label, names.empty() ? "(none)" : names});
  }
  t.print(std::cout, "  ");
  std::cout << "\nclosest:\n";
  print_diff(std::cout, subject, matches.front().side, matches.front().diffs);
  return Ok{};
}

Status run_explain(const Context& ctx, Api& api, const ExplainOptions& o) {
  const std::size_t n = o.keys.size() + o.files.size();
  if (n < 1 || n > 2) {
    return usage_error(
        "explain takes two sides (KEY KEY, --file A --file B, or KEY --file A) or one miss record "
        "(--file MISS.json, or one KEY) to compare with stored entries of its label");
  }
  std::vector<Side> sides;
  for (const auto& k : o.keys) {
    auto s = stored_side(api, k);
    if (!s) return s.error();
    sides.push_back(std::move(*s));
  }
  for (const auto& f : o.files) {
    auto s = side_from_file(f);
    if (!s) return s.error();
    sides.push_back(std::move(*s));
  }
  if (sides.size() == 2) return compare_two(ctx, sides[0], sides[1]);
  return search(ctx, api, sides[0]);
}

}  // namespace

void add_explain(CLI::App& app, Context& ctx, Commands& out) {
  auto o = std::make_shared<ExplainOptions>();
  auto* sub =
      app.add_subcommand("explain",
                         "which key fields differ: two keys, two explanation files, or a miss "
                         "record against the stored entries of its label");
  sub->add_option("KEY", o->keys, "stored keys (or unique prefixes)");
  sub->add_option("--file,-f", o->files,
                  "a key explanation JSON (or a miss-log record / manifest holding one)");
  out.push_back({sub, [&ctx, o] {
                   return with_api(ctx, [&](Api& api) { return run_explain(ctx, api, *o); });
                 }});
}

}  // namespace kcache::cli
