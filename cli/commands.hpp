// The subcommands. Each add_* registers one command's options on `app` and
// appends what to run when it was chosen; the run functions print to stdout
// (a table, or JSON with --json) and return an Error for main() to report.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/api.hpp"
#include "cli/context.hpp"

namespace kcache::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<Status()> run;
};
using Commands = std::vector<Command>;

// Connects (parses --server) and runs `fn(api)`.
template <class Fn>
Status with_api(const Context& ctx, Fn fn) {
  auto api = Api::connect(ctx);
  if (!api) return api.error();
  return fn(*api);
}

void add_stats(CLI::App& app, Context& ctx, Commands& out);
void add_ls(CLI::App& app, Context& ctx, Commands& out);
void add_inspect(CLI::App& app, Context& ctx, Commands& out);
void add_evict(CLI::App& app, Context& ctx, Commands& out);  // evict, rm, pin and unpin
void add_verify(CLI::App& app, Context& ctx, Commands& out);
void add_leases(CLI::App& app, Context& ctx, Commands& out);
void add_explain(CLI::App& app, Context& ctx, Commands& out);
void add_transfer(CLI::App& app, Context& ctx, Commands& out);  // get and put

}  // namespace kcache::cli
