// kcache verify: the server-side scrub (POST /v1/verify[?remove=true]).
// The server reports nothing until it is done, so a terminal gets a spinner
// with the elapsed time, erased before the result is printed.
// Exit 1 when corrupt objects remain (found and not removed).
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

// Without --timeout, verify waits this long: it reads every stored object.
constexpr std::chrono::hours k_verify_timeout{24};

Status run_verify(const Context& ctx, Api& api, bool remove) {
  auto timeout = ctx.timeout_given
                     ? std::chrono::milliseconds(static_cast<std::int64_t>(ctx.timeout_s * 1000))
                     : std::chrono::duration_cast<std::chrono::milliseconds>(k_verify_timeout);
  Spinner spinner(std::string(remove ? "verifying (and removing corrupt) " : "verifying ") +
                      "stored objects on " + api.url(),
                  !ctx.json && Spinner::stderr_is_tty());
  auto rep = api.call_json("POST", remove ? "/v1/verify?remove=true" : "/v1/verify", Role::admin,
                           "", "", timeout);
  const double elapsed = spinner.finish();
  if (!rep) return rep.error();
  const auto checked = rep->value("checked", 0ull);
  const auto removed = rep->value("removed", 0ull);
  const json& corrupt = (*rep)["corrupt"];
  const std::size_t n_corrupt = corrupt.is_array() ? corrupt.size() : 0;
  if (ctx.json) {
    json j = *rep;
    j["elapsed_s"] = elapsed;
    std::cout << j.dump(2) << '\n';
  } else {
    print_fields(std::cout, {{"checked", std::to_string(checked)},
                             {"corrupt", std::to_string(n_corrupt)},
                             {"removed", std::to_string(removed)},
                             {"elapsed", format_duration(elapsed)}});
    if (n_corrupt > 0) {
      std::cout << "\ncorrupt objects" << (remove ? " (quarantined or removed)" : "") << '\n';
      for (const auto& k : corrupt) std::cout << "  " << k.get<std::string>() << '\n';
    }
  }
  if (n_corrupt > removed) {
    return make_error(Errc::corrupt,
                      std::to_string(n_corrupt - removed) +
                          " corrupt objects remain; `kcache verify --remove` drops them");
  }
  return Ok{};
}

}  // namespace

void add_verify(CLI::App& app, Context& ctx, Commands& out) {
  auto remove = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand(
      "verify", "check every stored object on the server (exit 1 if corrupt ones remain)");
  sub->add_flag("--remove", *remove, "drop (quarantine) the corrupt objects found");
  out.push_back({sub, [&ctx, remove] {
                   return with_api(ctx, [&](Api& api) { return run_verify(ctx, api, *remove); });
                 }});
}

}  // namespace kcache::cli
