#include "artifact/cubin_listing.hpp"

#include "artifact/cubin.hpp"

namespace kcache::artifact {

namespace {

std::string arch_name(int sm) { return sm > 0 ? "sm_" + std::to_string(sm) : "unknown"; }

// "cuda:sm_90" -> 90; anything else (a CPU target, empty) -> nullopt.
std::optional<int> cuda_sm(std::string_view target) {
  if (!target.starts_with("cuda:")) return std::nullopt;
  auto sm = parse_sm_arch(target.substr(5));
  if (!sm.ok()) return std::nullopt;
  return *sm;
}

Status mismatch(const std::string& name, int have, int want) {
  return make_error(Errc::key_mismatch, "bundle carries cubin " + name + " for " + arch_name(have) +
                                            "; this device is sm_" + std::to_string(want));
}

}  // namespace

bool is_cuda_elf(std::span<const std::uint8_t> b) {
  return b.size() >= 20 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F' &&
         (b[18] | (b[19] << 8)) == k_em_cuda;
}

std::vector<CubinEntry> list_cubins(std::span<const Section> sections) {
  std::vector<CubinEntry> out;
  for (const auto& s : sections) {
    if (!is_cuda_elf(s.data)) continue;
    auto info = read_cubin_arch(s.data);
    out.push_back({s.name, info.ok() ? info->sm : 0});
  }
  return out;
}

nlohmann::json cubins_json(std::span<const CubinEntry> cubins) {
  auto arr = nlohmann::json::array();
  for (const auto& c : cubins) arr.push_back({{"name", c.name}, {"arch", arch_name(c.sm)}});
  return arr;
}

Status check_cubins_for_target(const nlohmann::json& manifest, std::span<const Section> sections,
                               std::string_view target) {
  auto want = cuda_sm(target);
  if (!want) return Ok{};
  if (manifest.is_object() && manifest.contains("cubins")) {
    const auto& list = manifest["cubins"];
    if (!list.is_array()) return make_error(Errc::corrupt, "manifest \"cubins\" is not a list");
    for (const auto& c : list) {
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("arch") ||
          !c["arch"].is_string()) {
        return make_error(Errc::corrupt, "manifest \"cubins\" entry without name and arch");
      }
      auto name = c["name"].get<std::string>();
      auto sm = parse_sm_arch(c["arch"].get<std::string>());
      int have = sm.ok() ? *sm : 0;
      if (have != *want) return mismatch(name, have, *want);
    }
  }
  for (const auto& c : list_cubins(sections)) {
    if (c.sm != *want) return mismatch(c.name, c.sm, *want);
  }
  return Ok{};
}

}  // namespace kcache::artifact
