// Bundle reader. Three stages, in the order the threat model requires:
//   1. check_frame: magic, version, flags, declared length, SHA-256 trailer;
//   2. check_signature: Ed25519 over the trailer, against the trust store;
//   3. parse_body: manifest and section table, every length checked against
//      both the remaining input and the limits before it is used.
// Only read_bundle decompresses, after all three stages have passed.
#include <algorithm>
#include <set>
#include <string>

#include "artifact/bundle.hpp"
#include "artifact/bundle_format.hpp"
#include "artifact/bundle_rules.hpp"
#include "artifact/byte_io.hpp"
#include "artifact/section_codec.hpp"
#include "common/hex.hpp"
#include "common/sha256.hpp"

namespace kcache::artifact {

using namespace detail;

namespace {

using Bytes = std::span<const std::uint8_t>;

struct Frame {
  std::uint32_t version = 0;
  bool is_signed = false;
  std::uint64_t total = 0;
  Bytes body;     // [0, trailer): header, manifest and sections
  Bytes trailer;  // 32 bytes
  Bytes key_id;   // 8 bytes when signed
  Bytes signature;
};

struct SectionRef {
  std::string name;
  std::uint64_t uncompressed = 0;
  Bytes compressed;
  Bytes sha;
};

struct Body {
  nlohmann::json manifest;
  std::vector<SectionRef> sections;
};

Error truncated(const std::string& what) {
  return make_error(Errc::truncated, "bundle ends inside the " + what);
}

Result<Frame> check_frame(Bytes bytes, const ReadLimits& limits) {
  std::size_t n = std::min(bytes.size(), k_magic.size());
  if (!std::equal(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n), k_magic.begin())) {
    return make_error(Errc::bad_magic, "not a kcache bundle (wrong magic bytes)");
  }
  if (bytes.size() < 12) return truncated("header");
  Frame f;
  f.version = load_le<std::uint32_t>(bytes.data() + 8);
  if (f.version != k_format_version) {
    return make_error(Errc::bad_version, "bundle format version " + std::to_string(f.version) +
                                             ", this build reads " + std::to_string(k_format_version));
  }
  if (bytes.size() < k_header_size) return truncated("header");
  auto flags = load_le<std::uint32_t>(bytes.data() + 12);
  if ((flags & ~k_known_flags) != 0) return make_error(Errc::corrupt, "unknown header flags");
  f.is_signed = (flags & k_flag_signed) != 0;
  f.total = load_le<std::uint64_t>(bytes.data() + 16);
  if (bytes.size() > limits.max_bundle_bytes || f.total > limits.max_bundle_bytes) {
    return make_error(Errc::too_large, "bundle is over the " +
                                           std::to_string(limits.max_bundle_bytes) + "-byte limit");
  }
  std::uint64_t sig_size = f.is_signed ? k_signature_block_size : 0;
  if (f.total < k_min_unsigned_size + sig_size) {
    return make_error(Errc::corrupt, "declared bundle length is below the minimum");
  }
  if (bytes.size() < f.total) return truncated("declared length");
  if (bytes.size() > f.total) return make_error(Errc::corrupt, "bytes after the declared length");

  auto trailer_at = static_cast<std::size_t>(f.total - sig_size - k_trailer_size);
  f.body = bytes.first(trailer_at);
  f.trailer = bytes.subspan(trailer_at, k_trailer_size);
  Digest d = sha256(f.body);
  if (!std::equal(d.begin(), d.end(), f.trailer.begin())) {
    return make_error(Errc::corrupt, "SHA-256 trailer does not match the bundle");
  }
  if (f.is_signed) {
    f.key_id = bytes.subspan(trailer_at + k_trailer_size, k_key_id_size);
    f.signature = bytes.subspan(trailer_at + k_trailer_size + k_key_id_size, k_signature_size);
  }
  return f;
}

Status check_signature(const Frame& f, const ReadOptions& opts, bool& verified) {
  verified = false;
  if (opts.require_signature && opts.trust == nullptr) {
    return make_error(Errc::invalid_argument, "require_signature needs a trust store");
  }
  if (!f.is_signed) {
    if (opts.require_signature) return make_error(Errc::bad_signature, "bundle is not signed");
    return Ok{};
  }
  if (opts.trust == nullptr) return Ok{};
  std::vector<std::uint8_t> message(k_signature_domain.begin(), k_signature_domain.end());
  message.insert(message.end(), f.trailer.begin(), f.trailer.end());
  if (auto st = opts.trust->verify(to_hex(f.key_id), message, f.signature); !st) return st.error();
  verified = true;
  return Ok{};
}

Result<Body> parse_body(const Frame& f, const ReadLimits& limits) {
  ByteCursor c(f.body.subspan(k_header_size));
  Body body;
  auto manifest_len = c.take_le<std::uint32_t>();
  if (!manifest_len) return truncated("manifest length");
  if (*manifest_len > limits.max_manifest_bytes) {
    return make_error(Errc::too_large, "manifest of " + std::to_string(*manifest_len) +
                                           " bytes is over the limit");
  }
  auto text = c.take(*manifest_len);
  if (!text) return truncated("manifest");
  auto manifest = parse_manifest(*text);
  if (!manifest) return manifest.error();
  body.manifest = std::move(*manifest);

  auto count = c.take_le<std::uint32_t>();
  if (!count) return truncated("section count");
  if (*count > limits.max_sections) {
    return make_error(Errc::too_large, std::to_string(*count) + " sections is over the limit");
  }
  std::set<std::string, std::less<>> names;
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < *count; ++i) {
    auto name_len = c.take_le<std::uint16_t>();
    if (!name_len) return truncated("section table");
    auto name = c.take(*name_len);
    if (!name) return truncated("section name");
    SectionRef s;
    s.name.assign(name->begin(), name->end());
    if (!is_valid_section_name(s.name)) return make_error(Errc::corrupt, "invalid section name");
    if (!names.insert(s.name).second) {
      return make_error(Errc::corrupt, "duplicate section name '" + s.name + "'");
    }
    auto ulen = c.take_le<std::uint64_t>();
    auto clen = c.take_le<std::uint64_t>();
    auto sha = c.take(k_trailer_size);
    if (!ulen || !clen || !sha) return truncated("section header");
    if (*ulen > limits.max_section_uncompressed_bytes) {
      return make_error(Errc::too_large, "section '" + s.name + "' declares " +
                                             std::to_string(*ulen) + " bytes, over the limit");
    }
    if (*ulen > limits.max_total_uncompressed_bytes - std::min(total, limits.max_total_uncompressed_bytes)) {
      return make_error(Errc::too_large, "sections declare more than the total limit");
    }
    total += *ulen;
    auto data = c.take(*clen);
    if (!data) return truncated("data of section '" + s.name + "'");
    s.uncompressed = *ulen;
    s.compressed = *data;
    s.sha = *sha;
    body.sections.push_back(std::move(s));
  }
  if (c.remaining() != 0) return make_error(Errc::corrupt, "bytes after the last section");
  return body;
}

}  // namespace

Result<Bundle> read_bundle(std::span<const std::uint8_t> bytes, const ReadOptions& opts) {
  auto frame = check_frame(bytes, opts.limits);
  if (!frame) return frame.error();
  Bundle out;
  if (auto st = check_signature(*frame, opts, out.signature_verified); !st) return st.error();
  auto body = parse_body(*frame, opts.limits);
  if (!body) return body.error();
  if (opts.expected_key && body->manifest["key"].get_ref<const std::string&>() != *opts.expected_key) {
    return make_error(Errc::key_mismatch, "bundle is for key " +
                                              body->manifest["key"].get<std::string>() +
                                              ", expected " + *opts.expected_key);
  }
  for (SectionRef& ref : body->sections) {
    Section s{std::move(ref.name), {}};
    if (opts.decompress) {
      auto data = decompress_section(ref.compressed, ref.uncompressed);
      if (!data) {
        Error e = data.error();
        e.message = "section '" + s.name + "': " + e.message;
        return e;
      }
      Digest d = sha256(std::span<const std::uint8_t>(*data));
      if (!std::equal(d.begin(), d.end(), ref.sha.begin())) {
        return make_error(Errc::corrupt, "section '" + s.name + "' fails its SHA-256");
      }
      s.data = std::move(*data);
    }
    out.sections.push_back(std::move(s));
  }
  out.manifest = std::move(body->manifest);
  if (frame->is_signed) out.signer_key_id = to_hex(frame->key_id);
  out.digest_hex = to_hex(frame->trailer);
  return out;
}

Result<BundleSummary> inspect_bundle(std::span<const std::uint8_t> bytes, const ReadLimits& limits) {
  auto frame = check_frame(bytes, limits);
  if (!frame) return frame.error();
  auto body = parse_body(*frame, limits);
  if (!body) return body.error();
  BundleSummary out;
  out.format_version = frame->version;
  out.total_bytes = frame->total;
  out.manifest = std::move(body->manifest);
  for (const SectionRef& ref : body->sections) {
    out.sections.push_back({ref.name, ref.compressed.size(), ref.uncompressed, to_hex(ref.sha)});
  }
  if (frame->is_signed) out.signer_key_id = to_hex(frame->key_id);
  out.digest_hex = to_hex(frame->trailer);
  out.trailer_checked = true;
  return out;
}

}  // namespace kcache::artifact
