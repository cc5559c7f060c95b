// Ed25519 through OpenSSL 3's EVP interface. Keys travel as PEM text; inside
// the trust store only the raw 32-byte public keys are kept.
#include "artifact/signing.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <limits>

#include "common/hex.hpp"
#include "common/sha256.hpp"

namespace kcache::artifact {
namespace {

using PkeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

Result<BioPtr> memory_bio(std::string_view text) {
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return make_error(Errc::invalid_argument, "PEM text too large");
  }
  BioPtr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
  if (!bio) return make_error(Errc::internal, "BIO_new_mem_buf failed");
  return bio;
}

std::string bio_to_string(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<std::size_t>(len)) : std::string();
}

Result<PublicKeyBytes> raw_public_key(EVP_PKEY* key) {
  PublicKeyBytes out{};
  std::size_t len = out.size();
  if (EVP_PKEY_get_raw_public_key(key, out.data(), &len) != 1 || len != out.size()) {
    return make_error(Errc::internal, "cannot extract Ed25519 public key");
  }
  return out;
}

Result<std::string> public_pem_of(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    return make_error(Errc::internal, "cannot write public key PEM");
  }
  return bio_to_string(bio.get());
}

}  // namespace

struct SigningKey::Impl {
  PkeyPtr key{nullptr, &EVP_PKEY_free};
};

SigningKey::SigningKey(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Result<KeyPairPem> generate_key_pair() {
  EVP_PKEY* raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (raw == nullptr) return make_error(Errc::internal, "Ed25519 key generation failed");
  PkeyPtr key(raw, &EVP_PKEY_free);

  BioPtr priv(BIO_new(BIO_s_mem()), &BIO_free);
  if (!priv ||
      PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return make_error(Errc::internal, "cannot write private key PEM");
  }
  auto pub = public_pem_of(key.get());
  if (!pub) return pub.error();
  return KeyPairPem{bio_to_string(priv.get()), std::move(*pub)};
}

std::string key_id_for(const PublicKeyBytes& public_key) {
  Digest d = sha256(std::span<const std::uint8_t>(public_key));
  return to_hex(std::span<const std::uint8_t>(d.data(), 8));
}

Result<PublicKeyBytes> parse_public_pem(std::string_view pem) {
  auto bio = memory_bio(pem);
  if (!bio) return bio.error();
  PkeyPtr key(PEM_read_bio_PUBKEY(bio->get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) {
    ERR_clear_error();  // leave no stale errors in this thread's OpenSSL queue
    return make_error(Errc::invalid_argument, "not a PEM public key");
  }
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return make_error(Errc::invalid_argument, "public key is not Ed25519");
  }
  return raw_public_key(key.get());
}

Result<SigningKey> SigningKey::from_private_pem(std::string_view pem) {
  auto bio = memory_bio(pem);
  if (!bio) return bio.error();
  // An empty passphrase callback result: encrypted PEMs fail instead of
  // prompting on the terminal.
  auto no_password = [](char*, int, int, void*) -> int { return 0; };
  PkeyPtr key(PEM_read_bio_PrivateKey(bio->get(), nullptr, no_password, nullptr), &EVP_PKEY_free);
  if (!key) {
    ERR_clear_error();
    return make_error(Errc::invalid_argument, "not an unencrypted PEM private key");
  }
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return make_error(Errc::invalid_argument, "private key is not Ed25519");
  }
  auto pub = raw_public_key(key.get());
  if (!pub) return pub.error();
  auto impl = std::make_shared<Impl>();
  impl->key = std::move(key);
  SigningKey out(std::move(impl));
  out.public_key_ = *pub;
  out.key_id_ = key_id_for(*pub);
  return out;
}

std::string SigningKey::public_pem() const {
  auto pem = public_pem_of(impl_->key.get());
  return pem ? std::move(*pem) : std::string();
}

Result<SignatureBytes> SigningKey::sign(std::span<const std::uint8_t> message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  SignatureBytes sig{};
  std::size_t len = sig.size();
  // Ed25519 is "pure": no digest is named and the message goes in one call.
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, impl_->key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size()) != 1 ||
      len != sig.size()) {
    return make_error(Errc::internal, "Ed25519 signing failed");
  }
  return sig;
}

Result<std::string> TrustStore::add_public_pem(std::string_view pem) {
  auto key = parse_public_pem(pem);
  if (!key) return key.error();
  return add_public_key(*key);
}

Result<std::string> TrustStore::add_public_key(const PublicKeyBytes& public_key) {
  std::string id = key_id_for(public_key);
  auto it = keys_.find(id);
  if (it != keys_.end() && it->second != public_key) {
    return make_error(Errc::invalid_argument, "a different trusted key has key id " + id);
  }
  keys_.emplace(id, public_key);
  return id;
}

bool TrustStore::contains(std::string_view key_id) const { return keys_.find(key_id) != keys_.end(); }

std::vector<std::string> TrustStore::key_ids() const {
  std::vector<std::string> out;
  out.reserve(keys_.size());
  for (const auto& [id, key] : keys_) out.push_back(id);
  return out;
}

Status TrustStore::verify(std::string_view key_id, std::span<const std::uint8_t> message,
                          std::span<const std::uint8_t> signature) const {
  auto it = keys_.find(key_id);
  if (it == keys_.end()) {
    return make_error(Errc::bad_signature, "signer key " + std::string(key_id) + " is not trusted");
  }
  if (signature.size() != SignatureBytes{}.size()) {
    return make_error(Errc::bad_signature, "signature has the wrong length");
  }
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, it->second.data(),
                                          it->second.size()),
              &EVP_PKEY_free);
  MdCtxPtr ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return make_error(Errc::internal, "cannot set up Ed25519 verification");
  }
  if (EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(),
                       message.size()) != 1) {
    ERR_clear_error();
    return make_error(Errc::bad_signature,
                      "signature does not verify with key " + std::string(key_id));
  }
  return Ok{};
}

}  // namespace kcache::artifact
