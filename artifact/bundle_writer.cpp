// Bundle writer: validates the caller's manifest and sections against the
// same rules and default limits a reader applies, then lays the bytes out as
// docs/artifact.md describes.
#include <set>
#include <string>

#include "artifact/bundle.hpp"
#include "artifact/bundle_format.hpp"
#include "artifact/bundle_rules.hpp"
#include "artifact/byte_io.hpp"
#include "artifact/section_codec.hpp"
#include "common/sha256.hpp"

namespace kcache::artifact {

using namespace detail;

bool is_cache_key_hex(std::string_view key) { return is_lower_hex64(key); }

namespace {

Status check_sections(const std::vector<Section>& sections, const ReadLimits& limits) {
  if (sections.size() > limits.max_sections) {
    return make_error(Errc::too_large, std::to_string(sections.size()) + " sections, limit " +
                                           std::to_string(limits.max_sections));
  }
  std::set<std::string_view> names;
  std::uint64_t total = 0;
  for (const Section& s : sections) {
    if (!is_valid_section_name(s.name)) {
      return make_error(Errc::invalid_argument,
                        "section name must be 1..255 printable ASCII bytes: '" + s.name + "'");
    }
    if (!names.insert(s.name).second) {
      return make_error(Errc::invalid_argument, "duplicate section name '" + s.name + "'");
    }
    if (s.data.size() > limits.max_section_uncompressed_bytes) {
      return make_error(Errc::too_large, "section '" + s.name + "' is over the section limit");
    }
    total += s.data.size();
    if (total > limits.max_total_uncompressed_bytes) {
      return make_error(Errc::too_large, "sections are over the total size limit");
    }
  }
  return Ok{};
}

Result<std::string> manifest_text(const nlohmann::json& manifest, const ReadLimits& limits) {
  if (!manifest.is_object()) return make_error(Errc::invalid_argument, "manifest must be a JSON object");
  auto key = manifest.find("key");
  if (key == manifest.end() || !key->is_string() || !is_lower_hex64(key->get_ref<const std::string&>())) {
    return make_error(Errc::invalid_argument, "manifest \"key\" must be 64 lowercase hex characters");
  }
  if (!depth_at_most(manifest, k_max_manifest_depth)) {
    return make_error(Errc::invalid_argument, "manifest nests too deeply");
  }
  std::string text;
  try {
    text = manifest.dump();  // strict: invalid UTF-8 in a string throws
  } catch (const nlohmann::json::exception& e) {
    return make_error(Errc::invalid_argument, std::string("manifest: ") + e.what());
  }
  if (text.size() > limits.max_manifest_bytes) {
    return make_error(Errc::too_large, "manifest is over the manifest size limit");
  }
  return text;
}

}  // namespace

Result<std::vector<std::uint8_t>> write_bundle(const nlohmann::json& manifest,
                                               const std::vector<Section>& sections,
                                               const SigningKey* signer, int zstd_level) {
  const ReadLimits limits;  // never write what a default reader refuses
  if (zstd_level < k_min_zstd_level || zstd_level > k_max_zstd_level) {
    return make_error(Errc::invalid_argument, "zstd level must be in 1..19");
  }
  auto text = manifest_text(manifest, limits);
  if (!text) return text.error();
  if (auto st = check_sections(sections, limits); !st) return st.error();

  std::vector<std::uint8_t> out(k_magic.begin(), k_magic.end());
  put_u32(out, k_format_version);
  put_u32(out, signer != nullptr ? k_flag_signed : 0u);
  put_u64(out, 0);  // total_length, patched below
  put_u32(out, static_cast<std::uint32_t>(text->size()));
  out.insert(out.end(), text->begin(), text->end());
  put_u32(out, static_cast<std::uint32_t>(sections.size()));
  for (const Section& s : sections) {
    auto packed = compress_section(s.data, zstd_level);
    if (!packed) return packed.error();
    put_u16(out, static_cast<std::uint16_t>(s.name.size()));
    out.insert(out.end(), s.name.begin(), s.name.end());
    put_u64(out, s.data.size());
    put_u64(out, packed->size());
    Digest d = sha256(std::span<const std::uint8_t>(s.data));
    out.insert(out.end(), d.begin(), d.end());
    out.insert(out.end(), packed->begin(), packed->end());
  }

  std::uint64_t total = out.size() + k_trailer_size + (signer != nullptr ? k_signature_block_size : 0);
  if (total > limits.max_bundle_bytes) {
    return make_error(Errc::too_large, "bundle is over the bundle size limit");
  }
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<std::uint8_t>(total >> (8 * i));

  Digest trailer = sha256(std::span<const std::uint8_t>(out));
  out.insert(out.end(), trailer.begin(), trailer.end());
  if (signer != nullptr) {
    std::vector<std::uint8_t> message(k_signature_domain.begin(), k_signature_domain.end());
    message.insert(message.end(), trailer.begin(), trailer.end());
    auto sig = signer->sign(message);
    if (!sig) return sig.error();
    const PublicKeyBytes& pub = signer->public_key();
    Digest id = sha256(std::span<const std::uint8_t>(pub));
    out.insert(out.end(), id.begin(), id.begin() + k_key_id_size);
    out.insert(out.end(), sig->begin(), sig->end());
  }
  return out;
}

}  // namespace kcache::artifact
