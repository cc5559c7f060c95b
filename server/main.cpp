// kcache-server: parse the configuration, open storage, serve until
// SIGTERM/SIGINT, drain, exit 0. Exit 2 on a configuration error, 1 when
// storage cannot be opened.
#include <cstdio>
#include <iostream>
#include <string_view>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "server/config.hpp"
#include "server/server.hpp"
#include "storage/backend.hpp"

int main(int argc, char** argv) {
  using namespace kcache;
  server::ServerConfig config;
  // The option table as docs/operations.md lists it (scripts/options_doc.sh).
  if (argc == 2 && std::string_view(argv[1]) == "--options-markdown") {
    std::cout << server::options_markdown();
    return 0;
  }
  try {
    std::string help;
    auto parsed = server::parse_config(argc, argv, &help);
    if (!parsed) {
      std::cout << help;
      return 0;
    }
    config = *parsed;
  } catch (const server::ConfigError& e) {
    std::fprintf(stderr, "kcache-server: %s\n", e.what());
    return 2;
  }

  // Logs go to stderr; stdout carries only the "listening on" line.
  auto logger = spdlog::stderr_color_mt("kcache", spdlog::color_mode::never);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
  auto level = spdlog::level::from_str(config.log_level);
  if (level == spdlog::level::off && config.log_level != "off") {
    std::fprintf(stderr, "kcache-server: --log-level: unknown level '%s'\n", config.log_level.c_str());
    return 2;
  }
  spdlog::set_level(level);
  spdlog::flush_on(spdlog::level::info);

  auto backend = storage::open_backend(config.storage, config.max_bytes);
  if (!backend) {
    std::fprintf(stderr, "kcache-server: cannot open storage '%s': %s: %s\n", config.storage.c_str(),
                 errc_name(backend.error().code), backend.error().message.c_str());
    return 1;
  }
  try {
    server::Server srv(config, std::move(backend.value()));
    return srv.run();
  } catch (const server::ConfigError& e) {
    std::fprintf(stderr, "kcache-server: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kcache-server: fatal: %s\n", e.what());
    return 1;
  }
}
