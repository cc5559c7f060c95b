// kcache evict (POST /v1/evict, by policy, optionally --dry-run) and
// kcache rm KEY… (DELETE /v1/artifacts/{key}).
//
// evict lists the matching entries *before* evicting, so that it can show
// each evicted key's label and size (the server answers with keys only);
// the listing never counts as an access, so it cannot change what LRU picks.
#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "cli/entries.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

struct EvictOptions {
  std::string max_bytes, older_than;
  std::string order = "lru";  // which go first under --max-bytes: lru or value
  EntryFilter filter;
  bool dry_run = false;
};

Result<json> policy_of(const EvictOptions& o) {
  json p = json::object();
  if (!o.max_bytes.empty()) {
    auto b = parse_size(o.max_bytes);
    if (!b)
      return usage_error("--max-bytes " + o.max_bytes +
                         ": give a size such as 20G, 500M or 1048576");
    p["max_bytes"] = *b;
  }
  if (!o.older_than.empty()) {
    auto s = parse_duration(o.older_than);
    if (!s)
      return usage_error("--older-than " + o.older_than +
                         ": give a duration such as 7d, 12h or 3h30m");
    p["older_than_s"] = *s;
  }
  const auto& f = o.filter;
  if (!f.target.empty()) p["target"] = f.target;
  if (!f.mode.empty()) p["mode"] = f.mode;
  if (!f.label_prefix.empty()) p["label_prefix"] = f.label_prefix;
  if (!f.toolchain.empty()) p["toolchain"] = f.toolchain;
  if (p.empty()) {
    return usage_error(
        "evict needs a policy: --max-bytes, --older-than, --target, --mode, --label-prefix or "
        "--toolchain (try --dry-run first)");
  }
  p["dry_run"] = o.dry_run;
  p["order"] = o.order;
  return p;
}

Status run_evict(const Context& ctx, Api& api, const EvictOptions& o) {
  auto policy = policy_of(o);
  if (!policy) return policy.error();
  auto before = list_entries(api, o.filter);
  if (!before) return before.error();
  std::map<std::string, json> by_key;
  for (const auto& e : before->entries) by_key[e.value("key", "")] = e;

  auto rep = api.call_json("POST", "/v1/evict", Role::admin, "", policy->dump());
  if (!rep) return rep.error();
  json entries = json::array();
  for (const auto& k : (*rep)["keys"]) {
    auto it = by_key.find(k.get<std::string>());
    entries.push_back(it != by_key.end() ? it->second : json{{"key", k}});
  }
  if (ctx.json) {
    json j = *rep;
    j["policy"] = *policy;
    j["entries"] = entries;
    std::cout << j.dump(2) << '\n';
    return Ok{};
  }
  const auto now = now_unix_ms();
  if (!entries.empty()) {
    Table t({"KEY", "LABEL", "SIZE", "LAST ACCESS"},
            {Align::left, Align::left, Align::right, Align::right});
    for (const auto& e : entries) {
      t.add({e.value("key", ""), e.value("label", "?"), format_bytes(e.value("size", 0ull)),
             format_ago(e.value("last_access_ms", 0ll), now)});
    }
    t.print(std::cout);
  }
  const auto n = entries.size();
  std::cout << (o.dry_run ? "would evict " : "evicted ") << n
            << (n == 1 ? " entry, " : " entries, ") << format_bytes((*rep).value("bytes", 0ull))
            << (o.dry_run ? " (dry run: nothing removed)" : "") << '\n';
  return Ok{};
}

Status run_rm(const Context& ctx, Api& api, const std::vector<std::string>& texts) {
  json removed = json::array(), missing = json::array();
  for (const auto& text : texts) {
    auto key = resolve_key(api, text);
    if (!key && key.error().code != Errc::not_found) return key.error();
    if (!key) {
      missing.push_back(text);
      if (!ctx.json) std::cout << "not found  " << text << '\n';
      continue;
    }
    auto r = api.call("DELETE", "/v1/artifacts/" + *key, Role::admin, "artifact " + *key);
    if (!r && r.error().code != Errc::not_found) return r.error();
    (r ? removed : missing).push_back(*key);
    if (!ctx.json) std::cout << (r ? "removed    " : "not found  ") << *key << '\n';
  }
  if (ctx.json) std::cout << json{{"removed", removed}, {"not_found", missing}}.dump(2) << '\n';
  if (!missing.empty()) {
    return make_error(Errc::not_found, std::to_string(missing.size()) + " of " +
                                           std::to_string(texts.size()) +
                                           " keys were not stored on " + api.url());
  }
  return Ok{};
}

Status run_pin(const Context& ctx, Api& api, const std::vector<std::string>& texts, bool on) {
  json done = json::array();
  for (const auto& text : texts) {
    auto key = resolve_key(api, text);
    if (!key) return key.error();
    auto r = api.call(on ? "PUT" : "DELETE", "/v1/entries/" + *key + "/pin", Role::admin, "entry " + *key);
    if (!r) return r.error();
    done.push_back(*key);
    if (!ctx.json) std::cout << (on ? "pinned     " : "unpinned   ") << *key << '\n';
  }
  if (ctx.json) std::cout << json{{on ? "pinned" : "unpinned", done}}.dump(2) << '\n';
  return Ok{};
}

}  // namespace

void add_evict(CLI::App& app, Context& ctx, Commands& out) {
  auto o = std::make_shared<EvictOptions>();
  auto* sub = app.add_subcommand(
      "evict", "evict entries by policy (criteria combine with AND); --dry-run lists them");
  sub->add_option("--max-bytes", o->max_bytes,
                  "evict least recently used matching entries until usage ≤ SIZE (20G)");
  sub->add_option("--older-than", o->older_than,
                  "last access longer ago than DURATION (7d, 12h, 3h30m)");
  sub->add_option("--order", o->order,
                  "which go first under --max-bytes: lru (default) or value (least compile time saved per "
                  "byte; pinned entries never)")
      ->check(CLI::IsMember({"lru", "value"}));
  sub->add_option("--target", o->filter.target, "only entries of this target");
  sub->add_option("--mode", o->filter.mode, "only entries of this mode");
  sub->add_option("--label-prefix", o->filter.label_prefix, "only labels starting with this");
  sub->add_option("--toolchain", o->filter.toolchain, "only entries of this toolchain");
  sub->add_flag("--dry-run,-n", o->dry_run, "list what would be evicted; remove nothing");
  out.push_back({sub, [&ctx, o] {
                   return with_api(ctx, [&](Api& api) { return run_evict(ctx, api, *o); });
                 }});

  auto keys = std::make_shared<std::vector<std::string>>();
  auto* rm = app.add_subcommand("rm", "remove entries by key (exit 3 if any was not stored)");
  rm->add_option("KEY", *keys, "keys, or unique prefixes of at least 6 hex digits")->required();
  out.push_back({rm, [&ctx, keys] {
                   return with_api(ctx, [&](Api& api) { return run_rm(ctx, api, *keys); });
                 }});

  for (const bool on : {true, false}) {
    auto pin_keys = std::make_shared<std::vector<std::string>>();
    auto* pin = app.add_subcommand(on ? "pin" : "unpin",
                                   on ? "pin entries: no eviction (quota or policy) removes them; rm still does"
                                      : "unpin entries: eviction may choose them again");
    pin->add_option("KEY", *pin_keys, "keys, or unique prefixes of at least 6 hex digits")->required();
    out.push_back({pin, [&ctx, pin_keys, on] {
                     return with_api(ctx, [&](Api& api) { return run_pin(ctx, api, *pin_keys, on); });
                   }});
  }
}

}  // namespace kcache::cli
