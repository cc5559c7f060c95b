#include "region_fetch.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "artifact/bundle.hpp"
#include "common/hex.hpp"
#include "common/sha256.hpp"

namespace kcache::regions {
namespace {

constexpr const char* k_package_section = "aoti/package.pt2";
constexpr const char* k_region_format = "kcache-aoti-v1";

Result<FetchedPackage> open_region_unchecked(const PlanRegion& r,
                                             const std::vector<std::uint8_t>& bytes,
                                             const std::string& workdir) {
  artifact::ReadOptions opts;
  opts.expected_key = r.key;
  auto bundle = artifact::read_bundle(bytes, opts);
  if (!bundle.ok()) return bundle.error();
  const auto& m = bundle->manifest;
  if (!m.contains("aoti") || m["aoti"].value("format", "") != k_region_format) {
    return make_error(Errc::invalid_argument,
                      "bundle for " + r.label + " is not an AOTInductor region");
  }
  const auto& aoti = m["aoti"];
  if (aoti.value("region_sha256", "") != r.region_sha256) {
    return make_error(Errc::key_mismatch, "bundle for " + r.label +
                                              " was compiled from another graph than the plan's");
  }
  for (const auto& s : bundle->sections) {
    if (s.name != k_package_section) continue;
    if (to_hex(sha256(s.data)) != aoti.value("package_sha256", "")) {
      return make_error(Errc::corrupt, "package of " + r.label + " does not match its manifest");
    }
    FetchedPackage out;
    out.path = workdir + "/" + r.key + ".pt2";
    std::ofstream f(out.path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(s.data.data()), static_cast<std::streamsize>(s.data.size()));
    if (!f.flush()) return make_error(Errc::io_error, "cannot write " + out.path);
    out.constant_fqns = aoti.at("constant_fqns").get<std::vector<std::string>>();
    out.compile_seconds = m.value("compile_seconds", 0.0);
    return out;
  }
  return make_error(Errc::corrupt, "bundle for " + r.label + " has no " + k_package_section);
}

// A manifest is the producer's JSON: a field of the wrong type is a corrupt
// bundle, never an exception out of this program.
Result<FetchedPackage> open_region(const PlanRegion& r, const std::vector<std::uint8_t>& bytes,
                                   const std::string& workdir) {
  try {
    return open_region_unchecked(r, bytes, workdir);
  } catch (const nlohmann::json::exception& e) {
    return make_error(Errc::corrupt, "bundle for " + r.label + ": malformed manifest (" +
                                         e.what() + ")");
  }
}

}  // namespace

Result<std::map<std::string, FetchedPackage>> fetch_packages(Client& client, const Plan& plan,
                                                             const std::string& workdir) {
  std::map<std::string, FetchedPackage> out;
  std::string missing;
  for (const auto& [key, region] : plan.regions) {
    auto got = client.get(key);
    if (!got.ok()) return got.error();
    if (!got->has_value()) {
      missing += "\n  " + region.label + " " + key;
      continue;
    }
    auto pkg = open_region(region, **got, workdir);
    if (!pkg.ok()) return pkg.error();
    out.emplace(key, std::move(*pkg));
  }
  if (!missing.empty()) {
    std::string how = plan.prewarm_command.empty() ? "python -m kcache.aoti_prewarm" : plan.prewarm_command;
    return make_error(Errc::not_found,
                      "kcache has no compiled package for these regions (node tier and server "
                      "asked; refused bundles count as missing):" + missing +
                          "\nprewarm them where Python and the compiler are, with the same "
                          "KCACHE_URL / KCACHE_LOCAL_DIR:\n  " + how);
  }
  return out;
}

}  // namespace kcache::regions
