// libFuzzer target: every entry point that parses untrusted bundle or cubin
// bytes, under small limits so the fuzzer explores structure, not size.
// Any crash, sanitizer report, leak or escaped exception is a bug.
#include <cstdint>
#include <cstdlib>

#include "artifact/bundle.hpp"
#include "artifact/cubin.hpp"
#include "common/sha256.hpp"
#include "fuzz/fuzz_key.hpp"

namespace {

using namespace kcache::artifact;

const TrustStore& fuzz_trust() {
  static const TrustStore trust = [] {
    TrustStore t;
    if (!t.add_public_pem(kcache::fuzz::k_fuzz_public_pem).ok()) std::abort();
    return t;
  }();
  return trust;
}

ReadLimits small_limits() {
  ReadLimits l;
  l.max_bundle_bytes = 1 << 20;
  l.max_manifest_bytes = 64 << 10;
  l.max_sections = 16;
  l.max_section_uncompressed_bytes = 1 << 20;
  l.max_total_uncompressed_bytes = 4 << 20;
  return l;
}

// The input with its length field and trailer recomputed (and the signed
// flag cleared): libFuzzer cannot forge SHA-256, so without this every
// mutation past the header would stop at the trailer check.
std::vector<std::uint8_t> resealed(std::span<const std::uint8_t> bytes) {
  std::vector<std::uint8_t> b(bytes.begin(), bytes.end());
  b[12] &= 0xfe;
  for (int i = 0; i < 8; ++i) b[16 + i] = static_cast<std::uint8_t>(b.size() >> (8 * i));
  kcache::Digest d = kcache::sha256(std::span<const std::uint8_t>(b.data(), b.size() - 32));
  std::copy(d.begin(), d.end(), b.end() - 32);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  const ReadLimits limits = small_limits();

  (void)inspect_bundle(bytes, limits);

  ReadOptions plain;
  plain.limits = limits;
  auto b = read_bundle(bytes, plain);
  if (b.ok() && b->manifest.dump().empty()) std::abort();  // results must be usable

  ReadOptions strict = plain;
  strict.trust = &fuzz_trust();
  strict.require_signature = true;
  strict.expected_key = std::string(kcache::fuzz::k_fuzz_cache_key);
  auto s = read_bundle(bytes, strict);
  if (s.ok() && !s->signature_verified) std::abort();

  if (size >= 64) {
    std::vector<std::uint8_t> sealed = resealed(bytes);
    (void)inspect_bundle(sealed, limits);
    (void)read_bundle(sealed, plain);
  }

  (void)check_cubin_arch(bytes, "sm_90");
  return 0;
}
