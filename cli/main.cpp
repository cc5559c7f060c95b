// kcache: the admin command line for a kcache-server (docs/cli.md).
// Exit codes: 0 ok, 1 error, 2 usage, 3 not found.
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace kcache::cli;
  Context ctx;
  CLI::App app{"kcache: inspect and look after a kcache-server cache (docs/cli.md)", "kcache"};
  app.set_version_flag("--version", std::string("kcache ") + KCACHE_CLI_VERSION);
  app.require_subcommand(1, 1);
  app.fallthrough();  // global options may also follow the command
  app.footer("Exit codes: 0 ok, 1 error, 2 usage, 3 not found.");
  app.add_option("--server", ctx.server, "kcache-server URL, http:// or https:// (default http://127.0.0.1:8420)")
      ->envname("KCACHE_URL");
  app.add_option("--token", ctx.token, "bearer token sent as Authorization (never printed)")
      ->envname("KCACHE_TOKEN");
  app.add_option("--namespace", ctx.ns,
                 "the namespace to act in, sent as X-Kcache-Namespace (default: the token's only "
                 "namespace, else \"default\"; docs/namespaces.md)")
      ->envname("KCACHE_NAMESPACE");
  app.add_option("--cacert", ctx.ca_file, "PEM CA bundle that signs the server's certificate "
                 "(https; default: the system store)")->envname("KCACHE_CA_FILE");
  app.add_option("--cert", ctx.cert_file, "PEM client certificate, for a server that requires mTLS")
      ->envname("KCACHE_CLIENT_CERT");
  app.add_option("--key", ctx.key_file, "PEM private key of --cert")->envname("KCACHE_CLIENT_KEY");
  app.add_flag("--json", ctx.json, "print JSON for scripts instead of a table");
  auto* timeout = app.add_option("--timeout", ctx.timeout_s,
                                 "seconds to wait for each answer (default 30; verify: "
                                 "no limit unless given)")
                      ->check(CLI::PositiveNumber);

  Commands commands;
  add_stats(app, ctx, commands);
  add_ls(app, ctx, commands);
  add_inspect(app, ctx, commands);
  add_evict(app, ctx, commands);
  add_verify(app, ctx, commands);
  add_leases(app, ctx, commands);
  add_explain(app, ctx, commands);
  add_transfer(app, ctx, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return k_exit_usage;
  }
  ctx.timeout_given = timeout->count() > 0;

  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    ctx.command = c.app->get_name();
    auto st = c.run();
    std::cout.flush();
    if (!st) {
      std::fprintf(stderr, "kcache %s: %s\n", ctx.command.c_str(), st.error().message.c_str());
      return exit_code_for(st.error().code);
    }
    return k_exit_ok;
  }
  return k_exit_usage;
}
