// Namespaces: the stores, quotas, trust and retention of every namespace
// one kcache-server serves (docs/namespaces.md). Who may act in which
// namespace is the authorizer's (server/http_front/authorizer.hpp); this is what
// a namespace *is* once the request is allowed in it.
//
// Every namespace has its own store (storage::open_namespace_backend: the
// default namespace is the server's --storage as a kcache from before
// namespaces wrote it; another is a folder beside it on disk, or a key
// prefix on Redis), so a read in one namespace cannot return another's
// entry whatever the key. Keys the server shares across namespaces (the hot
// tier, leases, landings, waiters) use scoped_key(): the bare key in
// "default", "<ns>/<key>" elsewhere.
//
// Quotas: admit() runs before an upload is stored. Over quota, the
// namespace's own entries are evicted by its retention policy (value or
// LRU; pinned entries never) until the upload fits; one that cannot fit is
// Errc::full with a message naming the namespace, its quota and usage.
// Uploads to one namespace are admitted one at a time, so two cannot both
// take the last free bytes.
//
// Reload (SIGHUP): the file is read again; quotas, trust, retention and
// read-through take effect for requests that start after; a namespace new
// in the file gets its store opened; one gone from it stops resolving (its
// store stays open, its entries stay stored). On failure nothing changes.
// Thread safety: every method may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "server/http_front/namespace_file.hpp"
#include "server/trusted_keys.hpp"
#include "storage/backend.hpp"

namespace kcache::server {

struct Namespace {
  NamespaceSpec spec;
  storage::Backend* store = nullptr;         // owned by Namespaces
  std::shared_ptr<TrustedKeys> trusted_keys;  // null: no key files (uploads unchecked unless signed)
  std::shared_ptr<std::mutex> admit_mu;      // one admission at a time per namespace
  const std::string& name() const { return spec.name; }
};

using NamespacePtr = std::shared_ptr<const Namespace>;

struct AdmitReport {
  std::vector<std::string> evicted;  // keys evicted to make room
  std::uint64_t evicted_bytes = 0;
};

class Namespaces {
 public:
  // `default_store` is the server's own store (it becomes "default"; it must outlive this). With
  // an empty `file` there is one namespace, "default", whose trust is the
  // server's --require-signed / --trusted-keys.
  static Result<std::unique_ptr<Namespaces>> open(std::string storage_uri, storage::Backend& default_store,
                                                  std::string file, bool require_signed,
                                                  std::vector<std::string> server_trusted_keys);

  NamespacePtr find(const std::string& name) const;  // nullptr if unknown
  std::vector<NamespacePtr> all() const;             // "default" first, then by name
  NamespacePtr default_namespace() const { return find(k_default_namespace); }
  // Where a read in `ns` looks: ns itself, then its read-through links in
  // order (those still configured).
  std::vector<NamespacePtr> read_chain(const NamespacePtr& ns) const;
  storage::Backend& default_store() const { return *default_store_; }

  // Makes room for an upload of `bytes` (a new entry) within `ns`'s quota,
  // evicting by its retention policy. Errc::full when it cannot fit.
  // Blocking (storage calls): call on the pool.
  Result<AdmitReport> admit(const Namespace& ns, std::uint64_t bytes) const;

  Status reload();

 private:
  Namespaces(std::string uri, storage::Backend& default_store, std::string file, bool require_signed,
             std::vector<std::string> server_keys);
  Result<std::map<std::string, NamespacePtr>> build(const std::vector<NamespaceSpec>& specs);

  const std::string uri_;
  const std::string file_;
  const bool require_signed_;
  const std::vector<std::string> server_keys_;
  storage::Backend* default_store_;  // the server's; it outlives this
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<storage::Backend>> stores_;  // GUARDED_BY(mu_): never closed before exit
  std::map<std::string, NamespacePtr> by_name_;                      // GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<std::mutex>> admit_mus_;     // GUARDED_BY(mu_): kept across reloads
};

// The key under which server-wide tables (hot tier, leases, waiters,
// landings) know `key` of namespace `ns`: the key itself in "default",
// "<ns>/<key>" elsewhere.
inline std::string scoped_key(const std::string& ns, const std::string& key) {
  return ns == k_default_namespace ? key : ns + "/" + key;
}

// The bare key of a scoped key that belongs to `ns`; nullopt for another
// namespace's (a default key has no '/').
inline std::optional<std::string> unscoped_key(const std::string& ns, const std::string& scoped) {
  if (ns == k_default_namespace) {
    if (scoped.find('/') != std::string::npos) return std::nullopt;
    return scoped;
  }
  const std::string prefix = ns + "/";
  if (scoped.rfind(prefix, 0) != 0) return std::nullopt;
  return scoped.substr(prefix.size());
}

}  // namespace kcache::server
