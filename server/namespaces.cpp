#include "server/namespaces.hpp"

#include <algorithm>

namespace kcache::server {

Namespaces::Namespaces(std::string uri, storage::Backend& default_store, std::string file,
                       bool require_signed, std::vector<std::string> server_keys)
    : uri_(std::move(uri)),
      file_(std::move(file)),
      require_signed_(require_signed),
      server_keys_(std::move(server_keys)),
      default_store_(&default_store) {}

Result<std::unique_ptr<Namespaces>> Namespaces::open(std::string storage_uri,
                                                     storage::Backend& default_store, std::string file,
                                                     bool require_signed, std::vector<std::string> server_trusted_keys) {
  std::unique_ptr<Namespaces> n(new Namespaces(std::move(storage_uri), default_store, std::move(file),
                                               require_signed, std::move(server_trusted_keys)));
  if (auto st = n->reload(); !st) return st.error();
  return n;
}

Status Namespaces::reload() {
  std::vector<NamespaceSpec> specs;
  if (file_.empty()) {
    specs.emplace_back().name = k_default_namespace;
  } else {
    auto loaded = load_namespace_file(file_);
    if (!loaded) return loaded.error();
    specs = std::move(*loaded);
  }
  auto built = build(specs);
  if (!built) return built.error();
  std::lock_guard lock(mu_);
  by_name_ = std::move(*built);
  return Ok{};
}

Result<std::map<std::string, NamespacePtr>> Namespaces::build(const std::vector<NamespaceSpec>& specs) {
  std::map<std::string, NamespacePtr> out;
  for (const auto& spec : specs) {
    auto ns = std::make_shared<Namespace>();
    ns->spec = spec;
    // The server's own trust settings hold in every namespace: its keys are
    // trusted everywhere, and --require-signed makes every namespace signed-only.
    ns->spec.signed_only = spec.signed_only || require_signed_;
    auto files = spec.trusted_key_files;
    files.insert(files.end(), server_keys_.begin(), server_keys_.end());
    auto keys = TrustedKeys::load(files);
    if (!keys) return make_error(keys.error().code, "namespace '" + spec.name + "': " + keys.error().message);
    ns->trusted_keys = std::shared_ptr<TrustedKeys>(std::move(*keys));
    std::lock_guard lock(mu_);
    if (spec.name == k_default_namespace) {
      ns->store = default_store_;
    } else {
      auto it = stores_.find(spec.name);
      if (it == stores_.end()) {
        auto opened = storage::open_namespace_backend(uri_, spec.name, 0);
        if (!opened) {
          return make_error(opened.error().code,
                            "namespace '" + spec.name + "': cannot open its store: " + opened.error().message);
        }
        it = stores_.emplace(spec.name, std::move(*opened)).first;
      }
      ns->store = it->second.get();
    }
    auto& mu = admit_mus_[spec.name];
    if (!mu) mu = std::make_shared<std::mutex>();
    ns->admit_mu = mu;
    out.emplace(spec.name, std::move(ns));
  }
  return out;
}

std::vector<NamespacePtr> Namespaces::read_chain(const NamespacePtr& ns) const {
  std::vector<NamespacePtr> chain{ns};
  for (const auto& name : ns->spec.read_through) {
    if (auto link = find(name)) chain.push_back(std::move(link));
  }
  return chain;
}

NamespacePtr Namespaces::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<NamespacePtr> Namespaces::all() const {
  std::vector<NamespacePtr> out;
  std::lock_guard lock(mu_);
  if (auto it = by_name_.find(k_default_namespace); it != by_name_.end()) out.push_back(it->second);
  for (const auto& [name, ns] : by_name_) {
    if (name != k_default_namespace) out.push_back(ns);
  }
  return out;
}

Result<AdmitReport> Namespaces::admit(const Namespace& ns, std::uint64_t bytes) const {
  const auto& spec = ns.spec;
  AdmitReport report;
  if (spec.quota_bytes == 0 && spec.quota_entries == 0) return report;
  if (spec.quota_bytes && bytes > spec.quota_bytes) {
    return make_error(Errc::full, "an upload of " + std::to_string(bytes) + " bytes is larger than namespace '" +
                                      spec.name + "''s quota of " + std::to_string(spec.quota_bytes) + " bytes");
  }
  auto fits = [&](const storage::Usage& u) {
    return (!spec.quota_bytes || u.bytes + bytes <= spec.quota_bytes) &&
           (!spec.quota_entries || u.entries + 1 <= spec.quota_entries);
  };
  auto usage = ns.store->usage();
  if (!usage) return usage.error();
  if (fits(*usage)) return report;
  storage::EvictPolicy policy;
  if (spec.quota_bytes) policy.max_bytes = spec.quota_bytes - bytes;
  if (spec.quota_entries) policy.max_entries = spec.quota_entries - 1;
  policy.order = spec.retention == RetentionPolicy::value ? storage::EvictOrder::value : storage::EvictOrder::lru;
  policy.value_window_ms = spec.value_window_ms;
  auto evicted = ns.store->evict(policy);
  if (!evicted) return evicted.error();
  report.evicted = std::move(evicted->keys);
  report.evicted_bytes = evicted->bytes;
  usage = ns.store->usage();
  if (!usage) return usage.error();
  if (!fits(*usage)) {
    std::string quota = spec.quota_bytes ? std::to_string(spec.quota_bytes) + " bytes" : "no byte limit";
    if (spec.quota_entries) quota += " and " + std::to_string(spec.quota_entries) + " entries";
    return make_error(Errc::full, "namespace '" + spec.name + "' is full: its quota is " + quota + ", it holds " +
                                      std::to_string(usage->bytes) + " bytes in " + std::to_string(usage->entries) +
                                      " entries that cannot be evicted (pinned or being read), and the upload has " +
                                      std::to_string(bytes) + " bytes");
  }
  return report;
}

}  // namespace kcache::server
