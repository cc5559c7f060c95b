#include "server/http/bundle_check.hpp"

#include "server/resp/resp_keyspace.hpp"

#include <cmath>

#include "artifact/bundle.hpp"

namespace kcache::server {

namespace {

std::string clean(const std::string& s) {
  std::string out = s.substr(0, k_max_meta_chars);
  for (auto& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || u >= 0x80) c = '?';
  }
  return out;
}

std::string string_at(const nlohmann::json& j, const char* name) {
  if (!j.is_object()) return {};
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

std::string toolchain_id(const nlohmann::json& manifest) {
  const nlohmann::json* field = nullptr;
  auto ex = manifest.find("explanation");
  if (ex != manifest.end() && ex->is_object()) {
    auto fields = ex->find("fields");
    if (fields != ex->end() && fields->is_object()) {
      auto tc = fields->find("toolchain");
      if (tc != fields->end() && tc->is_object()) field = &*tc;
    }
  }
  if (!field) return "unknown";
  std::string value = string_at(*field, "value");
  if (!value.empty()) {
    auto parsed = nlohmann::json::parse(value, nullptr, false);
    std::string torch = string_at(parsed, "torch");
    if (!torch.empty()) return clean("torch-" + torch);
  }
  std::string hash = string_at(*field, "hash");
  if (hash.size() >= 12) return clean("tc-" + hash.substr(0, 12));
  return "unknown";
}

}  // namespace

storage::EntryMeta meta_from_manifest(const nlohmann::json& manifest) {
  storage::EntryMeta meta;
  std::string label = string_at(manifest, "label");
  if (label.empty()) {
    auto ex = manifest.find("explanation");
    if (ex != manifest.end()) label = string_at(*ex, "label");
  }
  meta.label = clean(label);
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= meta.label.size() && !meta.label.empty()) {
    std::size_t j = meta.label.find('/', i);
    if (j == std::string::npos) j = meta.label.size();
    parts.push_back(meta.label.substr(i, j - i));
    i = j + 1;
  }
  if (parts.size() > 1) meta.target = parts[1];
  if (parts.size() > 2) meta.dtype = parts[2];
  if (parts.size() > 3) meta.mode = parts[3];
  auto cs = manifest.find("compile_seconds");
  if (cs != manifest.end() && cs->is_number()) {
    double s = cs->get<double>();
    if (std::isfinite(s) && s > 0 && s < 1e9) meta.compile_ms = static_cast<std::uint64_t>(std::llround(s * 1000));
  }
  meta.toolchain = toolchain_id(manifest);
  return meta;
}

static nlohmann::json explanation_of(const nlohmann::json& manifest) {
  auto ex = manifest.find("explanation");
  if (ex == manifest.end()) return nullptr;
  if (ex->is_object()) return *ex;
  if (ex->is_string()) {
    auto parsed = nlohmann::json::parse(ex->get<std::string>(), nullptr, false);
    if (parsed.is_object()) return parsed;
  }
  return nullptr;
}

Result<CheckedUpload> check_upload(const std::string& key, std::span<const std::uint8_t> bytes,
                                   std::uint64_t max_bundle_bytes, const SignaturePolicy& signatures) {
  artifact::ReadLimits limits;
  limits.max_bundle_bytes = max_bundle_bytes;
  nlohmann::json manifest;
  std::string digest_hex;
  if (signatures.trust != nullptr) {
    artifact::ReadOptions opts;
    opts.limits = limits;
    opts.trust = signatures.trust;
    opts.require_signature = signatures.require_signed;
    opts.decompress = false;  // the signature covers the trailer, which covers every byte
    auto bundle = artifact::read_bundle(bytes, opts);
    if (!bundle) return bundle.error();
    manifest = std::move(bundle->manifest);
    digest_hex = std::move(bundle->digest_hex);
  } else {
    auto summary = artifact::inspect_bundle(bytes, limits);
    if (!summary) return summary.error();
    manifest = std::move(summary->manifest);
    digest_hex = std::move(summary->digest_hex);
  }
  std::string embedded = string_at(manifest, "key");
  if (embedded != key) {
    return make_error(Errc::key_mismatch, "the bundle's manifest names key '" + clean(embedded).substr(0, 64) +
                                              "', not the key in the path");
  }
  return CheckedUpload{meta_from_manifest(manifest), digest_hex, explanation_of(manifest)};
}

bool bundle_matches_key(const std::string& key, const std::vector<std::uint8_t>& bytes) {
  // RESP values (server/resp/resp_keyspace.hpp) are opaque: storage's checksum
  // has already vouched for their bytes.
  if (resp::unwrap_value(bytes)) return true;
  auto summary = artifact::inspect_bundle(bytes);
  return summary && string_at(summary->manifest, "key") == key;
}

}  // namespace kcache::server
