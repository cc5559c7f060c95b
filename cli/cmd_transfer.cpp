// kcache get KEY -o FILE and kcache put FILE, for debugging.
//
// get checks what it downloaded (structure, trailer, embedded key) before
// writing FILE, and writes it through a temporary file so that FILE is
// either complete or untouched. put checks the bundle locally first
// (artifact::inspect_bundle) and takes the key from its manifest.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "artifact/bundle.hpp"
#include "cli/commands.hpp"
#include "cli/entries.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

Status write_file(const std::string& path, const std::string& data) {
  if (path == "-") {
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    return Ok{};
  }
  const std::string tmp = path + ".kcache-tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) return make_error(Errc::io_error, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return make_error(Errc::io_error, "cannot rename " + tmp + " to " + path);
  }
  return Ok{};
}

Status run_get(const Context& ctx, Api& api, const std::string& text, const std::string& path) {
  auto key = resolve_key(api, text);
  if (!key) return key.error();
  auto reply = api.call("GET", "/v1/artifacts/" + *key, Role::read, "artifact " + *key);
  if (!reply) return reply.error();
  auto summary = artifact::inspect_bundle(bytes_of(reply->body));
  if (!summary) {
    return make_error(Errc::corrupt, "the bytes served for " + *key + " are not a valid bundle (" +
                                         summary.error().message +
                                         "); nothing written. Try `kcache verify`.");
  }
  if (summary->manifest.value("key", "") != *key) {
    return make_error(Errc::corrupt,
                      "the bundle served for " + *key + " is for another key; nothing written");
  }
  if (auto st = write_file(path, reply->body); !st) return st;
  json j = {{"key", *key},
            {"path", path},
            {"bytes", reply->body.size()},
            {"digest", summary->digest_hex}};
  if (path == "-") return Ok{};  // stdout carries the bundle itself
  if (ctx.json)
    std::cout << j.dump(2) << '\n';
  else
    std::cout << "wrote " << format_bytes(reply->body.size()) << " to " << path << " (key " << *key
              << ")\n";
  return Ok{};
}

Status run_put(const Context& ctx, Api& api, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return usage_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string data = ss.str();
  auto summary = artifact::inspect_bundle(bytes_of(data));
  if (!summary) {
    return make_error(Errc::corrupt, path + " is not a valid kcache bundle (" +
                                         std::string(errc_name(summary.error().code)) + ": " +
                                         summary.error().message + "); nothing uploaded");
  }
  const std::string key = summary->manifest.value("key", "");
  if (!artifact::is_cache_key_hex(key))
    return make_error(Errc::corrupt, path + ": the manifest has no valid key");
  auto reply =
      api.call_json("PUT", "/v1/artifacts/" + key, Role::write, "", data,
                    std::chrono::milliseconds(static_cast<std::int64_t>(ctx.timeout_s * 1000) +
                                              static_cast<std::int64_t>(data.size() / 1000)));
  if (!reply) return reply.error();
  if (ctx.json) {
    std::cout << reply->dump(2) << '\n';
  } else {
    bool stored = reply->value("stored", false);
    std::cout << (stored ? "stored " : "already present ") << key << "  "
              << reply->value("label", "") << "  " << format_bytes(reply->value("size", 0ull))
              << '\n';
  }
  return Ok{};
}

}  // namespace

void add_transfer(CLI::App& app, Context& ctx, Commands& out) {
  struct GetArgs {
    std::string key, path;
  };
  auto g = std::make_shared<GetArgs>();
  auto* get =
      app.add_subcommand("get", "download one bundle to a file (checked before it is written)");
  get->add_option("KEY", g->key, "the key, or a unique prefix")->required();
  get->add_option("-o,--output", g->path, "file to write ('-' for stdout)")->required();
  out.push_back({get, [&ctx, g] {
                   return with_api(ctx,
                                   [&](Api& api) { return run_get(ctx, api, g->key, g->path); });
                 }});

  auto file = std::make_shared<std::string>();
  auto* put = app.add_subcommand("put", "upload a bundle file; the key comes from its manifest");
  put->add_option("FILE", *file, "a kcache bundle")->required()->check(CLI::ExistingFile);
  out.push_back({put, [&ctx, file] {
                   return with_api(ctx, [&](Api& api) { return run_put(ctx, api, *file); });
                 }});
}

}  // namespace kcache::cli
