// Ed25519 keys, trust stores and signed bundles: accepted from a trusted
// key, refused from an untrusted one, refused after any single flipped byte.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "artifact/bundle.hpp"
#include "artifact/signing.hpp"
#include "artifact_test_util.hpp"

namespace kcache::artifact {
namespace {

using namespace test_util;

SigningKey fresh_key(KeyPairPem* pem_out = nullptr) {
  auto pem = generate_key_pair();
  EXPECT_TRUE(pem.ok());
  if (pem_out != nullptr) *pem_out = *pem;
  auto key = SigningKey::from_private_pem(pem->private_pem);
  EXPECT_TRUE(key.ok());
  return *key;
}

Bytes signed_bundle(const SigningKey& key) {
  auto b = write_bundle({{"key", k_key_a}, {"label", "l"}}, {{"s", {1, 2, 3}}}, &key);
  EXPECT_TRUE(b.ok());
  return *b;
}

ReadOptions trusting(const TrustStore& trust, bool required = true) {
  ReadOptions opts;
  opts.trust = &trust;
  opts.require_signature = required;
  return opts;
}

TEST(ArtifactSigning, KeyPairPemAndKeyIds) {
  KeyPairPem pem;
  SigningKey key = fresh_key(&pem);
  EXPECT_NE(pem.private_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
  EXPECT_NE(pem.public_pem.find("BEGIN PUBLIC KEY"), std::string::npos);
  EXPECT_EQ(key.key_id().size(), 16u);
  EXPECT_TRUE(is_cache_key_hex(key.key_id() + std::string(48, '0')));
  EXPECT_EQ(key.public_pem(), pem.public_pem);

  auto pub = parse_public_pem(pem.public_pem);
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(*pub, key.public_key());
  EXPECT_EQ(key_id_for(*pub), key.key_id());

  TrustStore trust;
  auto id = trust.add_public_pem(pem.public_pem);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, key.key_id());
  EXPECT_TRUE(trust.add_public_pem(pem.public_pem).ok());  // idempotent
  EXPECT_EQ(trust.size(), 1u);
  EXPECT_TRUE(trust.contains(key.key_id()));
  EXPECT_EQ(trust.key_ids(), std::vector<std::string>{key.key_id()});
  EXPECT_NE(fresh_key().key_id(), key.key_id());
}

TEST(ArtifactSigning, RefusesBadPemAndOtherKeyTypes) {
  KeyPairPem pem;
  fresh_key(&pem);
  EXPECT_EQ(SigningKey::from_private_pem("garbage").error().code, Errc::invalid_argument);
  EXPECT_EQ(SigningKey::from_private_pem(pem.public_pem).error().code, Errc::invalid_argument);
  TrustStore trust;
  EXPECT_EQ(trust.add_public_pem(pem.private_pem).error().code, Errc::invalid_argument);
  EXPECT_EQ(trust.add_public_pem("").error().code, Errc::invalid_argument);

  EVP_PKEY* ec = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(ec, nullptr);
  BIO* priv = BIO_new(BIO_s_mem());
  BIO* pub = BIO_new(BIO_s_mem());
  ASSERT_EQ(PEM_write_bio_PrivateKey(priv, ec, nullptr, nullptr, 0, nullptr, nullptr), 1);
  ASSERT_EQ(PEM_write_bio_PUBKEY(pub, ec), 1);
  auto text_of = [](BIO* bio) {
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    return std::string(data, static_cast<std::size_t>(len));
  };
  std::string ec_priv = text_of(priv);
  std::string ec_pub = text_of(pub);
  BIO_free(priv);
  BIO_free(pub);
  EVP_PKEY_free(ec);
  EXPECT_EQ(SigningKey::from_private_pem(ec_priv).error().code, Errc::invalid_argument);
  EXPECT_EQ(trust.add_public_pem(ec_pub).error().code, Errc::invalid_argument);
}

TEST(ArtifactSigning, TrustedSignatureIsAccepted) {
  SigningKey key = fresh_key();
  TrustStore trust;
  ASSERT_TRUE(trust.add_public_key(key.public_key()).ok());
  Bytes b = signed_bundle(key);
  auto r = read_bundle(b, trusting(trust));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->signature_verified);
  EXPECT_EQ(r->signer_key_id, key.key_id());
  EXPECT_EQ(r->sections.at(0).data, (Bytes{1, 2, 3}));

  auto unverified = read_bundle(b, {});  // no trust store: read, but not verified
  ASSERT_TRUE(unverified.ok());
  EXPECT_FALSE(unverified->signature_verified);
  EXPECT_EQ(unverified->signer_key_id, key.key_id());
  auto s = inspect_bundle(b);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->signer_key_id, key.key_id());
}

TEST(ArtifactSigning, UntrustedKeyIsRefused) {
  SigningKey key = fresh_key();
  SigningKey other = fresh_key();
  TrustStore trust;
  ASSERT_TRUE(trust.add_public_key(other.public_key()).ok());
  Bytes b = signed_bundle(key);
  EXPECT_EQ(read_bundle(b, trusting(trust)).error().code, Errc::bad_signature);
  // A trust store refuses a signed-but-untrusted bundle even when signatures
  // are optional.
  EXPECT_EQ(read_bundle(b, trusting(trust, false)).error().code, Errc::bad_signature);

  // The trusted key's id over another key's signature.
  Bytes forged = b;
  Digest id = sha256(std::span<const std::uint8_t>(other.public_key()));
  std::copy(id.begin(), id.begin() + 8, forged.end() - 72);
  EXPECT_EQ(read_bundle(forged, trusting(trust)).error().code, Errc::bad_signature);
}

TEST(ArtifactSigning, EveryFlippedByteIsRefused) {
  SigningKey key = fresh_key();
  TrustStore trust;
  ASSERT_TRUE(trust.add_public_key(key.public_key()).ok());
  Bytes good = signed_bundle(key);
  ASSERT_TRUE(read_bundle(good, trusting(trust)).ok());
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t mask : {0x01, 0x80}) {
      Bytes b = good;
      b[i] ^= mask;
      auto r = read_bundle(b, trusting(trust));
      EXPECT_FALSE(r.ok()) << "byte " << i;
      if (!r.ok() && i >= good.size() - 72) {
        EXPECT_EQ(r.error().code, Errc::bad_signature) << i;
      }
    }
  }
}

TEST(ArtifactSigning, RequiredSignature) {
  SigningKey key = fresh_key();
  TrustStore trust;
  ASSERT_TRUE(trust.add_public_key(key.public_key()).ok());
  auto unsigned_bundle = write_bundle({{"key", k_key_a}}, {});
  ASSERT_TRUE(unsigned_bundle.ok());
  EXPECT_EQ(read_bundle(*unsigned_bundle, trusting(trust)).error().code, Errc::bad_signature);
  EXPECT_TRUE(read_bundle(*unsigned_bundle, trusting(trust, false)).ok());

  ReadOptions no_trust;
  no_trust.require_signature = true;
  EXPECT_EQ(read_bundle(signed_bundle(key), no_trust).error().code, Errc::invalid_argument);

  // Stripping the signature and resealing leaves an unsigned bundle, which a
  // reader that requires signatures refuses.
  Bytes stripped = signed_bundle(key);
  stripped.resize(stripped.size() - 72);
  patch_le(stripped, 12, 0, 4);
  reseal(stripped);
  EXPECT_TRUE(read_bundle(stripped, {}).ok());
  EXPECT_EQ(read_bundle(stripped, trusting(trust)).error().code, Errc::bad_signature);
}

}  // namespace
}  // namespace kcache::artifact
