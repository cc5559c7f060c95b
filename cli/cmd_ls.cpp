// kcache ls: one line per stored entry (GET /v1/entries, every page).
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/entries.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.2f", v);
  return buf;
}

struct LsOptions {
  EntryFilter filter;
  std::string sort = "key";
  bool reverse = false;
  std::size_t limit = 0;
};

Status run_ls(const Context& ctx, Api& api, LsOptions o) {
  // Biggest, most recent, most hit and newest first; keys ascending.
  o.filter.sort = o.sort == "last-access" ? "last_access" : o.sort;
  o.filter.descending = (o.sort != "key") != o.reverse;
  auto page = list_entries(api, o.filter, o.limit);
  if (!page) return page.error();
  if (ctx.json) {
    std::cout << json{{"entries", page->entries}, {"truncated", page->truncated}}.dump(2) << '\n';
    return Ok{};
  }
  const auto now = now_unix_ms();
  // VALUE: compile seconds this entry saves per MiB it takes (docs/namespaces.md
  // "Retention by value"); the eviction order of a namespace with the value policy.
  Table t({"LABEL", "KEY", "SIZE", "AGE", "LAST ACCESS", "HITS", "COMPILE", "VALUE s/MiB", "PIN", "TOOLCHAIN"},
          {Align::left, Align::left, Align::right, Align::right, Align::right, Align::right, Align::right,
           Align::right, Align::left, Align::left});
  std::uint64_t total = 0;
  for (const auto& e : page->entries) {
    const auto size = e.value("size", 0ull);
    total += size;
    t.add({e.value("label", ""), e.value("key", "").substr(0, 12), format_bytes(size),
           format_duration(static_cast<double>(now - e.value("created_ms", 0ll)) / 1000),
           format_ago(e.value("last_access_ms", 0ll), now), std::to_string(e.value("hits", 0ull)),
           format_duration(static_cast<double>(e.value("compile_ms", 0ull)) / 1000),
           fixed(e.value("value", 0.0) * 1048576.0), e.value("pinned", false) ? "yes" : "-",
           e.value("toolchain", "")});
  }
  if (!t.empty()) t.print(std::cout);
  std::cout << page->entries.size() << (page->entries.size() == 1 ? " entry, " : " entries, ")
            << format_bytes(total)
            << (page->truncated ? " (stopped at --limit; more are stored)" : "") << '\n';
  return Ok{};
}

}  // namespace

void add_ls(CLI::App& app, Context& ctx, Commands& out) {
  auto o = std::make_shared<LsOptions>();
  auto* sub = app.add_subcommand(
      "ls", "list stored entries: label, key prefix, size, age, last access, hits");
  sub->add_option("--label-prefix", o->filter.label_prefix,
                  "labels starting with this (e.g. GPT2Block/)");
  sub->add_option("--target", o->filter.target, "exact target, e.g. cpu:avx512 or cuda:sm_90");
  sub->add_option("--mode", o->filter.mode, "exact compile mode, e.g. default or max-autotune");
  sub->add_option("--toolchain", o->filter.toolchain, "exact toolchain, e.g. torch-2.13.0");
  sub->add_option("--sort", o->sort,
                  "key (default), size, last-access, hits, created or value (compile time saved "
                  "per byte); largest/newest/most valuable first")
      ->check(CLI::IsMember({"key", "size", "last-access", "hits", "created", "value"}));
  sub->add_flag("--reverse", o->reverse, "reverse the order");
  sub->add_option("--limit", o->limit, "show at most N entries (default: all)")
      ->check(CLI::PositiveNumber);
  out.push_back(
      {sub, [&ctx, o] { return with_api(ctx, [&](Api& api) { return run_ls(ctx, api, *o); }); }});
}

}  // namespace kcache::cli
