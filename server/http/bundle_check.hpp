// What the server checks before it stores an upload, and the listing
// metadata it derives from the verified manifest (never from client headers).
//
// check_upload(): artifact::inspect_bundle() (structure and SHA-256 trailer;
// nothing decompressed) — or, when a trust store is given, read_bundle()
// without decompression, which also checks the Ed25519 signature over the
// trailer (bad_signature: unsigned while required, signed by a key not in
// the store, or a signature that does not verify) — then the manifest's
// "key" must equal the path key.
// Metadata from the manifest:
//   label       "label" (else the explanation's "label"), e.g.
//               "GPT2Block/cpu:avx512/f32/default/train" = name/target/dtype/mode/phase
//   target, dtype, mode   the label's 2nd, 3rd and 4th '/'-separated parts
//   compile_ms  "compile_seconds" × 1000, rounded
//   toolchain   "torch-<version>" when explanation.fields.toolchain.value is
//               JSON text with a "torch" string, else "tc-" and the first 12
//               hex digits of that field's hash, else "unknown"
// Strings are cut to k_max_meta_chars and non-printable bytes replaced, so a
// hostile manifest cannot bloat indexes or break log lines.
// Thread safety: pure functions. CPU-heavy (hashes the bundle): call them on
// the blocking pool, not on an I/O thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/signing.hpp"
#include "common/result.hpp"
#include "storage/backend.hpp"

namespace kcache::server {

inline constexpr std::size_t k_max_meta_chars = 256;

struct CheckedUpload {
  storage::EntryMeta meta;
  std::string digest_hex;  // the bundle's SHA-256 trailer
  nlohmann::json explanation;  // the manifest's key explanation (docs/keys.md); null when absent
};

// Signatures on uploads. trust == nullptr: not checked. Otherwise a signed
// bundle must verify against `trust`, and an unsigned one is refused when
// require_signed.
struct SignaturePolicy {
  const artifact::TrustStore* trust = nullptr;
  bool require_signed = false;
};

Result<CheckedUpload> check_upload(const std::string& key, std::span<const std::uint8_t> bytes,
                                   std::uint64_t max_bundle_bytes, const SignaturePolicy& signatures = {});

storage::EntryMeta meta_from_manifest(const nlohmann::json& manifest);

// The Verifier handed to Backend::verify(): a well-formed bundle for `key`.
bool bundle_matches_key(const std::string& key, const std::vector<std::uint8_t>& bytes);

}  // namespace kcache::server
