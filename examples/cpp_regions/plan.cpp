#include "plan.hpp"

#include <cpuid.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/hex.hpp"
#include "common/sha256.hpp"

namespace kcache::regions {
namespace {

constexpr const char* k_plan_format = "kcache-aoti-plan-v1";

std::vector<std::string> strings(const nlohmann::json& j) {
  return j.get<std::vector<std::string>>();
}

bool cpuid7(unsigned reg_index, unsigned bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(7, 0, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg_index] >> bit) & 1u;
}

// Inductor names a host's vector ISA by space-separated tokens
// ("avx512 avx512_vnni amx_tile") and compiles for all of them. Every token
// must be known and present here; an unknown one is refused rather than
// risking SIGILL.
std::string missing_isa(const std::string& isa) {
  __builtin_cpu_init();
  std::string missing;
  std::stringstream tokens(isa);
  for (std::string t; tokens >> t;) {
    bool ok;
    if (t == "avx512") {
      ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    } else if (t == "avx2") {
      ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    } else if (t == "avx512_vnni") {
      ok = cpuid7(2, 11);  // ECX bit 11
    } else if (t == "amx_tile") {
      ok = cpuid7(3, 22) && cpuid7(3, 24) && cpuid7(3, 25);  // EDX: amx-bf16, amx-tile, amx-int8
    } else if (t == "novec") {
      ok = true;
    } else {
      ok = false;
    }
    if (!ok) missing += (missing.empty() ? "" : " ") + t;
  }
  return missing;
}

Status check_target(const PlanRegion& r) {
  const std::string& t = r.fields.target;
  if (t.starts_with("cuda:")) {
    return make_error(Errc::key_mismatch, "region " + r.label + " was compiled for " + t +
                                              "; this program runs regions on the CPU");
  }
  auto j = nlohmann::json::parse(t, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("isa") || !j["isa"].is_string()) {
    return make_error(Errc::invalid_argument, "region " + r.label + ": unreadable target field");
  }
  std::string isa = j["isa"].get<std::string>();
  if (std::string missing = missing_isa(isa); !missing.empty()) {
    return make_error(Errc::key_mismatch, "region " + r.label + " was compiled for the vector ISA '" +
                                              isa + "'; this CPU lacks (or kcache does not know) " +
                                              missing);
  }
  return Ok{};
}

Status check_torch(const PlanRegion& r, const std::string& torch_version) {
  auto j = nlohmann::json::parse(r.fields.toolchain, nullptr, false);
  if (j.is_discarded() || !j.contains("torch") || !j["torch"].is_string()) {
    return make_error(Errc::invalid_argument, "region " + r.label + ": unreadable toolchain field");
  }
  std::string built = j["torch"].get<std::string>();
  built = built.substr(0, built.find('+'));
  if (built != torch_version) {
    return make_error(Errc::key_mismatch, "region " + r.label + " was compiled by torch " + built +
                                              "; this program links libtorch " + torch_version);
  }
  return Ok{};
}

}  // namespace

Result<Plan> load_plan(const std::string& dir) {
  std::ifstream f(dir + "/plan.json");
  if (!f) return make_error(Errc::not_found, "no plan.json in " + dir);
  std::stringstream text;
  text << f.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(Errc::invalid_argument, dir + "/plan.json is not JSON");
  }
  try {
    if (j.at("format") != k_plan_format) {
      return make_error(Errc::bad_version, "plan format " + j.at("format").dump() + ", want " +
                                               k_plan_format);
    }
    Plan p;
    p.dir = dir;
    p.model = j.at("model");
    p.weights_file = j.at("weights");
    p.prewarm_command = j.value("prewarm_command", "");
    p.inputs = strings(j.at("inputs"));
    p.outputs = strings(j.at("outputs"));
    for (const auto& [key, r] : j.at("regions").items()) {
      PlanRegion region;
      region.key = key;
      region.label = r.at("label");
      const auto& fields = r.at("fields");
      for (keys::Field fld : keys::k_all_fields) {
        if (fld == keys::Field::schema) {
          region.fields.schema = fields.value("schema", std::string(keys::k_schema_version));
        } else {
          region.fields.get(fld) = fields.at(keys::field_name(fld)).get<std::string>();
        }
      }
      region.region_sha256 = to_hex(sha256(region.fields.region));
      p.regions.emplace(key, std::move(region));
    }
    for (const auto& s : j.at("stages")) {
      PlanStage stage{s.at("name"), s.at("key"), strings(s.at("inputs")),
                      strings(s.at("outputs")),
                      s.at("constants").get<std::map<std::string, std::string>>()};
      if (!p.regions.contains(stage.key)) {
        return make_error(Errc::invalid_argument, "stage " + stage.name + " names region " +
                                                      stage.key + ", which the plan lacks");
      }
      p.stages.push_back(std::move(stage));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return make_error(Errc::invalid_argument, dir + "/plan.json: " + e.what());
  }
}

Status check_plan(const Plan& plan, const std::string& torch_version) {
  for (const auto& [key, r] : plan.regions) {
    auto computed = keys::compute_key(r.fields);
    if (!computed.ok()) return computed.error();
    if (computed->hex() != key) {
      return make_error(Errc::key_mismatch, "region " + r.label + ": its key fields hash to " +
                                                computed->hex() + ", the plan says " + key);
    }
    if (auto s = check_target(r); !s.ok()) return s;
    if (auto s = check_torch(r, torch_version); !s.ok()) return s;
  }
  return Ok{};
}

}  // namespace kcache::regions
