// Artifact bundles: one self-describing, checksummed, optionally signed blob
// holding a JSON manifest and named zstd-compressed sections. The byte
// layout, limits and the error for each hostile input are in docs/artifact.md.
//
// Contract:
//  - write_bundle() needs a JSON object manifest whose "key" is the 64
//    lowercase hex cache key; anything else the caller adds ("explanation",
//    "label", "producer", "compile_seconds", ...) is stored verbatim. Section
//    names are 1..255 printable ASCII bytes (0x21..0x7e), unique. The writer
//    refuses (too_large) anything a reader with default ReadLimits would.
//  - read_bundle() checks, in this order: magic, version, flags, declared
//    length against the input and limits; the SHA-256 trailer; the signature
//    (when opts.trust is set or a signature is required); only then parses
//    the manifest and sections. No section is handed out before all checks
//    pass. Every hostile input yields an Error, never a crash, an exception
//    or an allocation larger than the limits allow.
//  - Signature policy: require_signature without a trust store is
//    invalid_argument. With a trust store, a signed bundle must verify with a
//    trusted key (bad_signature otherwise) and an unsigned one is accepted
//    only if require_signature is false.
//  - inspect_bundle() checks the structure and the trailer, not the
//    signature, and decompresses nothing: it is what an untrusting server
//    runs before storing a bundle.
// Thread safety: all functions are reentrant; a TrustStore may be shared by
// concurrent readers. Ownership: results own their bytes; nothing refers
// into the input span after a call returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/signing.hpp"
#include "common/result.hpp"

namespace kcache::artifact {

struct Section {
  std::string name;
  std::vector<std::uint8_t> data;
};

// Defaults fit the largest artifacts kcache expects (AOTInductor packages of
// a few hundred MB) with headroom; servers and fuzzers pass smaller ones.
struct ReadLimits {
  std::uint64_t max_bundle_bytes = 2ull << 30;                // 2 GiB
  std::uint64_t max_manifest_bytes = 16ull << 20;             // 16 MiB
  std::uint64_t max_sections = 4096;
  std::uint64_t max_section_uncompressed_bytes = 1ull << 30;  // 1 GiB
  std::uint64_t max_total_uncompressed_bytes = 4ull << 30;    // 4 GiB
};

struct ReadOptions {
  ReadLimits limits;
  // Public keys whose signatures are accepted; nullptr skips verification.
  const TrustStore* trust = nullptr;
  // Refuse bundles without a signature from a key in `trust`.
  bool require_signature = false;
  // When set, a manifest "key" different from this is key_mismatch.
  std::optional<std::string> expected_key;
  // When false, sections come back with names only (empty data) and their
  // per-section SHA-256 is not checked; the trailer still is.
  bool decompress = true;
};

struct Bundle {
  nlohmann::json manifest;
  std::vector<Section> sections;
  // Key id from the signature block, if the bundle is signed.
  std::optional<std::string> signer_key_id;
  // True only when the signature was verified against ReadOptions::trust.
  bool signature_verified = false;
  // Lowercase hex of the SHA-256 trailer: the bundle's content address.
  std::string digest_hex;
};

struct SectionSummary {
  std::string name;
  std::uint64_t compressed_bytes = 0;
  std::uint64_t uncompressed_bytes = 0;
  std::string sha256_hex;  // of the uncompressed bytes, as declared
};

struct BundleSummary {
  std::uint32_t format_version = 0;
  nlohmann::json manifest;
  std::vector<SectionSummary> sections;
  std::optional<std::string> signer_key_id;  // unverified
  std::string digest_hex;
  std::uint64_t total_bytes = 0;
  // True when the SHA-256 trailer was recomputed over the bundle
  // (inspect_bundle); false when it is only the trailer as stored
  // (inspect_bundle_ranges, which never reads the section data).
  bool trailer_checked = false;
};

// Reads `length` bytes at `offset` of the bundle (fewer only where it ends).
using RangeReader =
    std::function<Result<std::vector<std::uint8_t>>(std::uint64_t offset, std::uint64_t length)>;

// zstd_level must be in 1..19 (higher levels need windows readers refuse).
Result<std::vector<std::uint8_t>> write_bundle(const nlohmann::json& manifest,
                                               const std::vector<Section>& sections,
                                               const SigningKey* signer = nullptr,
                                               int zstd_level = 3);

Result<Bundle> read_bundle(std::span<const std::uint8_t> bytes, const ReadOptions& opts);

Result<BundleSummary> inspect_bundle(std::span<const std::uint8_t> bytes,
                                     const ReadLimits& limits = {});

// inspect_bundle() of a bundle of `size` bytes that is read through `read`,
// a part at a time: the header, the manifest, each section's header (data
// skipped) and the trailer; the same structure and limit checks and errors,
// except that the trailer is not recomputed (that needs every byte), so
// trailer_checked is false. Reads at most 28 + manifest + 4 + 4 KiB per
// section + 104 bytes, whatever the sections hold (artifact/bundle_peek.cpp).
Result<BundleSummary> inspect_bundle_ranges(std::uint64_t size, const RangeReader& read,
                                            const ReadLimits& limits = {});

// True when `key` is 64 lowercase hex characters.
bool is_cache_key_hex(std::string_view key);

}  // namespace kcache::artifact
