#include "server/http_front/namespace_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/hex.hpp"
#include "common/sha256.hpp"
#include "common/units.hpp"

namespace kcache::server {

namespace {

using nlohmann::json;

Error bad(const std::string& ns, const std::string& what) {
  return Error{Errc::invalid_argument, "namespace '" + ns + "': " + what};
}

bool token_text_ok(const std::string& t) {
  if (t.size() < 16 || t.size() > 512) return false;
  return std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
  });
}

std::optional<std::uint64_t> size_field(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_string()) return parse_byte_size(v.get<std::string>());
  return std::nullopt;
}

Status parse_tokens_field(const json& arr, NamespaceSpec& spec) {
  if (!arr.is_array()) return bad(spec.name, "tokens must be a list");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    const std::string where = "tokens[" + std::to_string(i) + "]: ";
    if (!t.is_object()) return bad(spec.name, where + "want {\"token\" or \"sha256\", \"role\"}");
    for (const auto& [k, _] : t.items()) {
      if (k != "token" && k != "sha256" && k != "role" && k != "comment") {
        return bad(spec.name, where + "unknown field '" + k + "'");
      }
    }
    if (!t.contains("role") || !t["role"].is_string()) return bad(spec.name, where + "role is missing");
    auto role = parse_role(t["role"].get<std::string>());
    if (!role) return bad(spec.name, where + "role must be read, write or admin");
    TokenEntry e{};
    e.role = *role;
    e.ns = spec.name;
    if (t.contains("token") == t.contains("sha256")) {
      return bad(spec.name, where + "give exactly one of token and sha256");
    }
    if (t.contains("token")) {
      if (!t["token"].is_string() || !token_text_ok(t["token"].get<std::string>())) {
        return bad(spec.name, where + "a token has 16 to 512 characters of [A-Za-z0-9-._~+/=]");
      }
      e.digest = sha256(t["token"].get<std::string>());
    } else {
      auto digest = t["sha256"].is_string() ? from_hex(t["sha256"].get<std::string>()) : std::nullopt;
      if (!digest || digest->size() != 32) return bad(spec.name, where + "sha256 must be 64 hex digits");
      std::copy(digest->begin(), digest->end(), e.digest.begin());
    }
    for (const auto& o : spec.tokens) {
      if (o.digest == e.digest) return bad(spec.name, where + "the same token twice");
    }
    spec.tokens.push_back(e);
  }
  return Ok{};
}

Status parse_trust(const json& t, const std::string& base_dir, NamespaceSpec& spec) {
  if (!t.is_object()) return bad(spec.name, "trust must be an object");
  for (const auto& [k, v] : t.items()) {
    if (k == "uploads") {
      if (v == "signed") spec.signed_only = true;
      else if (v == "any") spec.signed_only = false;
      else return bad(spec.name, "trust.uploads must be \"any\" or \"signed\"");
    } else if (k == "keys") {
      if (!v.is_array()) return bad(spec.name, "trust.keys must be a list of PEM file paths");
      for (const auto& p : v) {
        if (!p.is_string() || p.get<std::string>().empty()) return bad(spec.name, "trust.keys holds file paths");
        std::filesystem::path path(p.get<std::string>());
        if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
        spec.trusted_key_files.push_back(path.lexically_normal().string());
      }
    } else if (k != "comment") {
      return bad(spec.name, "trust: unknown field '" + k + "'");
    }
  }
  if (spec.signed_only && spec.trusted_key_files.empty()) {
    return bad(spec.name, "trust.uploads is \"signed\" but trust.keys names no key file");
  }
  return Ok{};
}

Status parse_retention(const json& r, NamespaceSpec& spec) {
  if (!r.is_object()) return bad(spec.name, "retention must be an object");
  for (const auto& [k, v] : r.items()) {
    if (k == "policy") {
      if (v == "value") spec.retention = RetentionPolicy::value;
      else if (v == "lru") spec.retention = RetentionPolicy::lru;
      else return bad(spec.name, "retention.policy must be \"value\" or \"lru\"");
    } else if (k == "window") {
      auto s = v.is_string() ? parse_duration_seconds(v.get<std::string>(), 1.0) : std::nullopt;
      if (!s || *s < 1.0) return bad(spec.name, "retention.window must be a duration of at least 1s, e.g. \"7d\"");
      spec.value_window_ms = static_cast<std::int64_t>(*s * 1000);
    } else if (k != "comment") {
      return bad(spec.name, "retention: unknown field '" + k + "'");
    }
  }
  return Ok{};
}

Result<NamespaceSpec> parse_one(const std::string& name, const json& body, const std::string& base_dir) {
  NamespaceSpec spec;
  spec.name = name;
  if (!valid_namespace_name(name)) {
    return bad(name, "a name has 1 to 63 characters of [a-z0-9_-] and starts with a letter or digit");
  }
  if (!body.is_object()) return bad(name, "want an object");
  for (const auto& [k, v] : body.items()) {
    Status st = Ok{};
    if (k == "tokens") {
      st = parse_tokens_field(v, spec);
    } else if (k == "anonymous_read") {
      if (!v.is_boolean()) return bad(name, "anonymous_read must be true or false");
      spec.anonymous_read = v.get<bool>();
    } else if (k == "quota_bytes" || k == "quota_entries") {
      auto n = k == "quota_bytes" ? size_field(v) : (v.is_number_unsigned() ? std::optional(v.get<std::uint64_t>()) : std::nullopt);
      if (!n) return bad(name, k + (k == "quota_bytes" ? " must be a size such as \"50GiB\" or a byte count" : " must be a whole number"));
      (k == "quota_bytes" ? spec.quota_bytes : spec.quota_entries) = *n;
    } else if (k == "trust") {
      st = parse_trust(v, base_dir, spec);
    } else if (k == "retention") {
      st = parse_retention(v, spec);
    } else if (k == "read_through") {
      if (!v.is_array()) return bad(name, "read_through must be a list of namespace names");
      for (const auto& n : v) {
        if (!n.is_string()) return bad(name, "read_through holds namespace names");
        spec.read_through.push_back(n.get<std::string>());
      }
    } else if (k != "comment") {
      return bad(name, "unknown field '" + k + "'");
    }
    if (!st) return st.error();
  }
  return spec;
}

}  // namespace

Result<std::vector<NamespaceSpec>> parse_namespace_file(std::string_view text, const std::string& base_dir) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return make_error(Errc::invalid_argument, "the namespaces file is not valid JSON");
  if (!doc.is_object() || !doc.contains("namespaces") || !doc["namespaces"].is_object()) {
    return make_error(Errc::invalid_argument, "the namespaces file needs a \"namespaces\" object");
  }
  for (const auto& [k, _] : doc.items()) {
    if (k != "namespaces" && k != "comment") return make_error(Errc::invalid_argument, "unknown top-level field '" + k + "'");
  }
  std::vector<NamespaceSpec> out;
  for (const auto& [name, body] : doc["namespaces"].items()) {
    auto spec = parse_one(name, body, base_dir);
    if (!spec) return spec.error();
    out.push_back(std::move(*spec));
  }
  if (std::none_of(out.begin(), out.end(), [](const auto& s) { return s.name == k_default_namespace; })) {
    NamespaceSpec d;
    d.name = k_default_namespace;
    out.insert(out.begin(), std::move(d));
  }
  std::set<std::string> names;
  for (const auto& s : out) names.insert(s.name);
  for (const auto& s : out) {
    std::set<std::string> seen;
    for (const auto& r : s.read_through) {
      if (r == s.name) return bad(s.name, "read_through names the namespace itself");
      if (!names.count(r)) return bad(s.name, "read_through names unknown namespace '" + r + "'");
      if (!seen.insert(r).second) return bad(s.name, "read_through names '" + r + "' twice");
    }
  }
  return out;
}

Result<std::vector<NamespaceSpec>> load_namespace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Errc::io_error, "cannot read namespaces file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto dir = std::filesystem::absolute(path).parent_path().string();
  auto parsed = parse_namespace_file(ss.str(), dir);
  if (!parsed) return make_error(parsed.error().code, path + ": " + parsed.error().message);
  return parsed;
}

}  // namespace kcache::server
