// kcache inspect KEY: one entry and its manifest (GET /v1/entries/{key}) —
// key fields from the explanation, sections (the compiled kernels and
// PyTorch's cache), producer, signature, and any other manifest fields
// (fallback ops, autotune choices, … when the producer recorded them).
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "cli/entries.hpp"
#include "cli/table.hpp"
#include "cli/units.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

constexpr std::size_t k_value_width = 72;

std::string producer_text(const json& p) {
  if (!p.is_object()) return "unknown";
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (p.contains("host"))
    add("host " + (p["host"].is_string() ? p["host"].get<std::string>() : p["host"].dump()));
  if (p.contains("pid")) add("pid " + p["pid"].dump());
  if (p.contains("kcache"))
    add("kcache " +
        (p["kcache"].is_string() ? p["kcache"].get<std::string>() : p["kcache"].dump()));
  if (p.contains("time") && p["time"].is_number() && p["time"].get<double>() > 0) {
    add("at " + format_utc(static_cast<std::int64_t>(p["time"].get<double>() * 1000)));
  }
  return out.empty() ? p.dump() : out;
}

std::string signature_text(const json& bundle) {
  if (!bundle.is_object()) return "unknown";
  const json& id = bundle["signer_key_id"];
  if (!id.is_string()) return "unsigned";
  return "signed, key id " + id.get<std::string>() +
         " (not verified here: the server checks structure; clients verify against their "
         "trusted keys)";
}

void print_key_fields(const json& expl) {
  if (!expl.is_object() || !expl["fields"].is_object()) {
    std::cout << "\nkey fields: the manifest carries no explanation\n";
    return;
  }
  std::cout << "\nkey fields\n";
  Table t({"FIELD", "HASH", "SIZE", "VALUE"},
          {Align::left, Align::left, Align::right, Align::left});
  for (const auto& [name, f] : expl["fields"].items()) {
    std::string value = f.value("value", "");
    if (value.empty()) value = f.value("detail", "");
    if (value.empty()) value = "(not inline: hash only)";
    t.add({name, f.value("hash", "").substr(0, 12), format_bytes(f.value("size", 0ull)),
           one_line(value, k_value_width)});
  }
  t.print(std::cout, "  ");
}

void print_sections(const json& bundle) {
  if (!bundle.is_object() || !bundle["sections"].is_array()) return;
  std::cout << "\nsections\n";
  Table t({"NAME", "COMPRESSED", "UNCOMPRESSED", "SHA-256"},
          {Align::left, Align::right, Align::right, Align::left});
  for (const auto& s : bundle["sections"]) {
    t.add({s.value("name", ""), format_bytes(s.value("compressed_bytes", 0ull)),
           format_bytes(s.value("uncompressed_bytes", 0ull)), s.value("sha256", "").substr(0, 12)});
  }
  t.print(std::cout, "  ");
}

void print_other(const json& manifest) {
  static const std::set<std::string> shown = {"key", "label", "explanation", "producer",
                                              "compile_seconds"};
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [name, v] : manifest.items()) {
    if (shown.count(name)) continue;
    if (v.is_array() && !v.empty() && v.size() <= 50) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        rows.emplace_back(i == 0 ? name : "",
                          one_line(v[i].is_string() ? v[i].get<std::string>() : v[i].dump(), 100));
      }
    } else {
      rows.emplace_back(name, one_line(v.is_string() ? v.get<std::string>() : v.dump(), 100));
    }
  }
  if (rows.empty()) return;
  std::cout << "\nother manifest fields\n";
  print_fields(std::cout, rows, "  ");
}

Status run_inspect(const Context& ctx, Api& api, const std::string& text) {
  auto key = resolve_key(api, text);
  if (!key) return key.error();
  auto body = api.call_json("GET", "/v1/entries/" + *key, Role::read, "entry " + *key);
  if (!body) return body.error();
  if (ctx.json) {
    std::cout << body->dump(2) << '\n';
    return Ok{};
  }
  const json& e = (*body)["entry"];
  const json& bundle = (*body)["bundle"];
  const json& manifest = (*body)["manifest"];
  const auto now = now_unix_ms();
  std::vector<std::pair<std::string, std::string>> rows = {
      {"key", *key},
      {"label", e.value("label", "")},
      {"size", format_bytes(e.value("size", 0ull))},
      {"created", format_ago(e.value("created_ms", 0ll), now) + " (" +
                      format_utc(e.value("created_ms", 0ll)) + ")"},
      {"last access", format_ago(e.value("last_access_ms", 0ll), now)},
      {"hits", std::to_string(e.value("hits", 0ull))},
      {"target", e.value("target", "")},
      {"dtype", e.value("dtype", "")},
      {"mode", e.value("mode", "")},
      {"toolchain", e.value("toolchain", "")},
      {"compile time", format_duration(static_cast<double>(e.value("compile_ms", 0ull)) / 1000)},
  };
  if (bundle.is_object()) {
    // The server reads only the header and tables (digest_checked false):
    // the digest is the stored one, not recomputed; say so, and how to check.
    const bool checked = bundle.value("digest_checked", true);
    rows.emplace_back("bundle", "format " + std::to_string(bundle.value("format_version", 0)) +
                                    ", digest " + bundle.value("digest", "") +
                                    (checked ? "" : " (as stored, not rehashed: `kcache verify` checks it)"));
    rows.emplace_back("signature", signature_text(bundle));
  } else {
    const json& err = (*body)["bundle_error"];
    rows.emplace_back(
        "bundle", "UNREADABLE: " + (err.is_object() ? err.value("message", "") : std::string("?")) +
                      " — run `kcache verify --remove`");
  }
  if (manifest.is_object()) rows.emplace_back("producer", producer_text(manifest["producer"]));
  print_fields(std::cout, rows);
  if (manifest.is_object()) print_key_fields(manifest["explanation"]);
  print_sections(bundle);
  if (manifest.is_object()) print_other(manifest);
  return Ok{};
}

}  // namespace

void add_inspect(CLI::App& app, Context& ctx, Commands& out) {
  auto key = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("inspect",
                                 "one entry's manifest: key fields, sections, producer, signature");
  sub->add_option("KEY", *key, "the key, or a unique prefix of at least 6 hex digits")->required();
  out.push_back({sub, [&ctx, key] {
                   return with_api(ctx, [&](Api& api) { return run_inspect(ctx, api, *key); });
                 }});
}

}  // namespace kcache::cli
