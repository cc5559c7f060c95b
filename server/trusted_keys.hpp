// TrustedKeys: the Ed25519 public keys whose signatures make an upload
// acceptable (--trusted-keys FILE…, --require-signed), reloadable on SIGHUP.
//
// Each file holds one or more "BEGIN PUBLIC KEY" PEM blocks (Ed25519
// SubjectPublicKeyInfo, as artifact::generate_key_pair() writes them).
// With no files the store is empty and snapshot() is nullptr: uploads are
// not signature-checked at all.
// Thread safety: snapshot() and reload() may be called concurrently; a
// snapshot stays valid (and unchanged) for as long as it is held.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "artifact/signing.hpp"
#include "common/result.hpp"

namespace kcache::server {

class TrustedKeys {
 public:
  // Loads every file; invalid_argument / io_error naming the bad file.
  static Result<std::unique_ptr<TrustedKeys>> load(std::vector<std::string> files);

  std::shared_ptr<const artifact::TrustStore> snapshot() const;
  // Re-reads the files; on failure the current keys stay in force.
  Status reload();
  std::size_t size() const;

 private:
  explicit TrustedKeys(std::vector<std::string> files) : files_(std::move(files)) {}
  static Result<std::shared_ptr<const artifact::TrustStore>> read(const std::vector<std::string>& files);

  const std::vector<std::string> files_;
  mutable std::mutex mu_;
  std::shared_ptr<const artifact::TrustStore> store_;  // GUARDED_BY(mu_)
};

}  // namespace kcache::server
