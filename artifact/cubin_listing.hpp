// The cubins a bundle carries, listed in its manifest with their ELF arch,
// and the restore-time check of that list against the running GPU target
// (docs/artifact.md, "Cubins in bundles").
//
// Contract:
//  - list_cubins() returns every (name, bytes) whose bytes are an ELF with
//    e_machine EM_CUDA, with the SM number read_cubin_arch() finds; a CUDA
//    ELF whose arch cannot be read is listed with sm 0 ("unknown"), so it
//    is refused rather than waved through. Other bytes are skipped.
//  - cubins_json() is the manifest form: [{"name": …, "arch": "sm_80"}].
//  - check_cubins_for_target(manifest, sections, target): when `target` is
//    a CUDA target ("cuda:sm_90", "cuda:sm_90a"), every cubin in the
//    manifest's "cubins" list and every cubin among `sections` must be for
//    that SM number: key_mismatch "bundle carries cubin NAME for sm_80; this
//    device is sm_90" otherwise; a malformed "cubins" list is corrupt. Any
//    other target (CPU keys, empty) checks nothing: Ok.
// Thread safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/bundle.hpp"
#include "common/result.hpp"

namespace kcache::artifact {

struct CubinEntry {
  std::string name;
  int sm = 0;  // 0: a CUDA ELF whose arch could not be read
};

bool is_cuda_elf(std::span<const std::uint8_t> bytes);

std::vector<CubinEntry> list_cubins(std::span<const Section> sections);

nlohmann::json cubins_json(std::span<const CubinEntry> cubins);

Status check_cubins_for_target(const nlohmann::json& manifest, std::span<const Section> sections,
                               std::string_view target);

}  // namespace kcache::artifact
