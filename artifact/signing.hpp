// Ed25519 signing keys and trust stores for artifact bundles.
//
// Contract:
//  - generate_key_pair() returns fresh PEM text: the private key as PKCS#8
//    ("BEGIN PRIVATE KEY"), the public key as SubjectPublicKeyInfo
//    ("BEGIN PUBLIC KEY"). Keep the private PEM secret; it is never logged.
//  - A key id is the first 8 bytes of SHA-256 of the raw 32-byte public key,
//    written as 16 lowercase hex characters. It names a key; it proves nothing.
//  - SigningKey and TrustStore refuse anything that is not Ed25519.
//  - Nothing here throws; failures are Error values (invalid_argument for bad
//    PEM or the wrong key type, bad_signature for a failed verification,
//    internal when OpenSSL itself fails).
// Thread safety: SigningKey is immutable after loading and may sign from many
// threads at once. TrustStore: const methods are safe concurrently; add_* needs
// exclusive access. No OpenSSL type appears in this header.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace kcache::artifact {

using PublicKeyBytes = std::array<std::uint8_t, 32>;
using SignatureBytes = std::array<std::uint8_t, 64>;

struct KeyPairPem {
  std::string private_pem;  // PKCS#8
  std::string public_pem;   // SubjectPublicKeyInfo
};

Result<KeyPairPem> generate_key_pair();

// 16 lowercase hex characters naming a raw Ed25519 public key.
std::string key_id_for(const PublicKeyBytes& public_key);

// Reads a SubjectPublicKeyInfo PEM that must hold an Ed25519 key.
Result<PublicKeyBytes> parse_public_pem(std::string_view pem);

class SigningKey {
 public:
  static Result<SigningKey> from_private_pem(std::string_view pem);

  const std::string& key_id() const { return key_id_; }
  const PublicKeyBytes& public_key() const { return public_key_; }
  std::string public_pem() const;
  Result<SignatureBytes> sign(std::span<const std::uint8_t> message) const;

 private:
  struct Impl;  // owns the OpenSSL key
  explicit SigningKey(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  PublicKeyBytes public_key_{};
  std::string key_id_;
};

class TrustStore {
 public:
  // Adds a trusted public key and returns its key id. Adding the same key
  // twice is harmless; a different key with a colliding id is refused.
  Result<std::string> add_public_pem(std::string_view pem);
  Result<std::string> add_public_key(const PublicKeyBytes& public_key);

  bool contains(std::string_view key_id) const;
  std::vector<std::string> key_ids() const;
  std::size_t size() const { return keys_.size(); }

  // bad_signature when key_id is not trusted or the signature does not verify.
  Status verify(std::string_view key_id, std::span<const std::uint8_t> message,
                std::span<const std::uint8_t> signature) const;

 private:
  std::map<std::string, PublicKeyBytes, std::less<>> keys_;
};

}  // namespace kcache::artifact
