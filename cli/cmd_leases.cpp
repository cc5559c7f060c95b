// kcache leases: who is compiling what, since when (GET /v1/leases).
#include <iostream>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

Status run_leases(const Context& ctx, Api& api) {
  auto rep = api.call_json("GET", "/v1/leases", Role::admin);
  if (!rep) return rep.error();
  if (ctx.json) {
    std::cout << rep->dump(2) << '\n';
    return Ok{};
  }
  const json& leases = (*rep)["leases"];
  const double ttl_s = static_cast<double>(rep->value("ttl_ms", 0ull)) / 1000;
  if (!leases.is_array() || leases.empty()) {
    std::cout << "no leases held (lease TTL " << format_duration(ttl_s) << ")\n";
    return Ok{};
  }
  Table t({"KEY", "HOLDER", "SINCE", "ACQUIRED", "REMAINING", "RENEWALS"},
          {Align::left, Align::left, Align::right, Align::left, Align::right, Align::right});
  for (const auto& l : leases) {
    t.add({l.value("key", ""), l.value("holder", ""),
           format_duration(static_cast<double>(l.value("age_ms", 0ull)) / 1000),
           format_utc(l.value("acquired_unix_ms", 0ll)),
           format_duration(static_cast<double>(l.value("remaining_ms", 0ull)) / 1000),
           std::to_string(l.value("renewals", 0ull))});
  }
  t.print(std::cout);
  std::cout << leases.size() << (leases.size() == 1 ? " lease" : " leases") << " held (lease TTL "
            << format_duration(ttl_s) << ")\n";
  return Ok{};
}

}  // namespace

void add_leases(CLI::App& app, Context& ctx, Commands& out) {
  auto* sub =
      app.add_subcommand("leases", "who is compiling what, since when (live single-flight leases)");
  out.push_back(
      {sub, [&ctx] { return with_api(ctx, [&](Api& api) { return run_leases(ctx, api); }); }});
}

}  // namespace kcache::cli
