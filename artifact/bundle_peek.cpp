// inspect_bundle_ranges: a bundle's summary read a part at a time, for a
// server inspecting a stored entry without loading it (GET /v1/entries/{key}).
// The same checks, in the same order and with the same errors, as
// check_frame and parse_body in bundle_reader.cpp, except the trailer hash.
#include <algorithm>
#include <set>
#include <string>

#include "artifact/bundle.hpp"
#include "artifact/bundle_format.hpp"
#include "artifact/bundle_rules.hpp"
#include "artifact/byte_io.hpp"
#include "common/hex.hpp"

namespace kcache::artifact {

using namespace detail;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Reads of at least k_window bytes, kept: consecutive small section
// headers cost one read, a section's data is skipped without being read.
class Window {
 public:
  static constexpr std::uint64_t k_window = 4096;

  Window(std::uint64_t end, const RangeReader& read) : end_(end), read_(read) {}

  // Exactly n bytes at offset; nullopt when they run past `end`; the
  // reader's error when it failed.
  Result<std::optional<Bytes>> take(std::uint64_t offset, std::uint64_t n) {
    if (offset > end_ || n > end_ - offset) return std::optional<Bytes>{};
    if (offset < start_ || offset + n > start_ + buf_.size()) {
      std::uint64_t want = std::min(std::max(n, k_window), end_ - offset);
      auto got = read_(offset, want);
      if (!got) return got.error();
      if (got->size() != want) return make_error(Errc::truncated, "the stored bundle ended early");
      start_ = offset;
      buf_ = std::move(*got);
    }
    auto first = buf_.begin() + static_cast<std::ptrdiff_t>(offset - start_);
    return std::optional<Bytes>(Bytes(first, first + static_cast<std::ptrdiff_t>(n)));
  }

 private:
  const std::uint64_t end_;
  const RangeReader& read_;
  std::uint64_t start_ = 0;
  Bytes buf_;
};

Error truncated(const std::string& what) { return make_error(Errc::truncated, "bundle ends inside the " + what); }

}  // namespace

Result<BundleSummary> inspect_bundle_ranges(std::uint64_t size, const RangeReader& read, const ReadLimits& limits) {
  auto head_r = read(0, std::min<std::uint64_t>(size, k_header_size));
  if (!head_r) return head_r.error();
  const Bytes& head = *head_r;
  std::size_t n = std::min(head.size(), k_magic.size());
  if (!std::equal(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(n), k_magic.begin())) {
    return make_error(Errc::bad_magic, "not a kcache bundle (wrong magic bytes)");
  }
  if (head.size() < 12) return truncated("header");
  BundleSummary out;
  out.format_version = load_le<std::uint32_t>(head.data() + 8);
  if (out.format_version != k_format_version) {
    return make_error(Errc::bad_version, "bundle format version " + std::to_string(out.format_version) +
                                             ", this build reads " + std::to_string(k_format_version));
  }
  if (head.size() < k_header_size) return truncated("header");
  auto flags = load_le<std::uint32_t>(head.data() + 12);
  if ((flags & ~k_known_flags) != 0) return make_error(Errc::corrupt, "unknown header flags");
  bool is_signed = (flags & k_flag_signed) != 0;
  std::uint64_t total = load_le<std::uint64_t>(head.data() + 16);
  if (size > limits.max_bundle_bytes || total > limits.max_bundle_bytes) {
    return make_error(Errc::too_large, "bundle is over the " + std::to_string(limits.max_bundle_bytes) + "-byte limit");
  }
  std::uint64_t sig_size = is_signed ? k_signature_block_size : 0;
  if (total < k_min_unsigned_size + sig_size) return make_error(Errc::corrupt, "declared bundle length is below the minimum");
  if (size < total) return truncated("declared length");
  if (size > total) return make_error(Errc::corrupt, "bytes after the declared length");
  const std::uint64_t trailer_at = total - sig_size - k_trailer_size;
  out.total_bytes = total;

  Window w(trailer_at, read);
  std::uint64_t pos = k_header_size;
  // n bytes at pos, advancing; `what` names them in a truncated error.
  auto take = [&](std::uint64_t len, const std::string& what) -> Result<Bytes> {
    auto got = w.take(pos, len);
    if (!got) return got.error();
    if (!*got) return truncated(what);
    pos += len;
    return std::move(**got);
  };
  auto manifest_len = take(4, "manifest length");
  if (!manifest_len) return manifest_len.error();
  auto mlen = load_le<std::uint32_t>(manifest_len->data());
  if (mlen > limits.max_manifest_bytes) {
    return make_error(Errc::too_large, "manifest of " + std::to_string(mlen) + " bytes is over the limit");
  }
  auto text = take(mlen, "manifest");
  if (!text) return text.error();
  auto manifest = parse_manifest(*text);
  if (!manifest) return manifest.error();
  out.manifest = std::move(*manifest);

  auto count_b = take(4, "section count");
  if (!count_b) return count_b.error();
  auto count = load_le<std::uint32_t>(count_b->data());
  if (count > limits.max_sections) return make_error(Errc::too_large, std::to_string(count) + " sections is over the limit");
  std::set<std::string, std::less<>> names;
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    auto name_len = take(2, "section table");
    if (!name_len) return name_len.error();
    auto name = take(load_le<std::uint16_t>(name_len->data()), "section name");
    if (!name) return name.error();
    SectionSummary s;
    s.name.assign(name->begin(), name->end());
    if (!is_valid_section_name(s.name)) return make_error(Errc::corrupt, "invalid section name");
    if (!names.insert(s.name).second) return make_error(Errc::corrupt, "duplicate section name '" + s.name + "'");
    auto rec = take(8 + 8 + k_trailer_size, "section header");
    if (!rec) return rec.error();
    s.uncompressed_bytes = load_le<std::uint64_t>(rec->data());
    s.compressed_bytes = load_le<std::uint64_t>(rec->data() + 8);
    s.sha256_hex = to_hex(std::span<const std::uint8_t>(rec->data() + 16, k_trailer_size));
    if (s.uncompressed_bytes > limits.max_section_uncompressed_bytes) {
      return make_error(Errc::too_large, "section '" + s.name + "' declares " + std::to_string(s.uncompressed_bytes) +
                                             " bytes, over the limit");
    }
    if (s.uncompressed_bytes > limits.max_total_uncompressed_bytes - std::min(sum, limits.max_total_uncompressed_bytes)) {
      return make_error(Errc::too_large, "sections declare more than the total limit");
    }
    sum += s.uncompressed_bytes;
    if (s.compressed_bytes > trailer_at - pos) return truncated("data of section '" + s.name + "'");
    pos += s.compressed_bytes;  // skipped, never read
    out.sections.push_back(std::move(s));
  }
  if (pos != trailer_at) return make_error(Errc::corrupt, "bytes after the last section");

  auto tail = read(trailer_at, k_trailer_size + (is_signed ? k_key_id_size : 0));
  if (!tail) return tail.error();
  if (tail->size() != k_trailer_size + (is_signed ? k_key_id_size : 0)) return truncated("trailer");
  out.digest_hex = to_hex(std::span<const std::uint8_t>(tail->data(), k_trailer_size));
  if (is_signed) out.signer_key_id = to_hex(std::span<const std::uint8_t>(tail->data() + k_trailer_size, k_key_id_size));
  out.trailer_checked = false;
  return out;
}

}  // namespace kcache::artifact
