// The plan a C++ job runs: written by `python -m kcache.aoti_prewarm`
// (plan.json), read here without Python.
//
// Contract: load_plan() parses and validates the file's structure;
// check_plan() recomputes every region's key from the key fields the plan
// carries with keys/ (the code Python's keys go through, so a region has one
// key in both languages) and checks the fields that describe the running
// host: the torch version libtorch was built as, and the CPU vector ISA the
// packages were compiled for. Nothing here touches the network.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "keys/cache_key.hpp"

namespace kcache::regions {

struct PlanRegion {
  std::string key;
  std::string label;
  keys::KeyFields fields;
  std::string region_sha256;  // of fields.region: what the bundle must name
};

struct PlanStage {
  std::string name;  // "embed", "h.3", "head"
  std::string key;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, std::string> constants;  // package constant -> weights name
};

struct Plan {
  std::string dir;
  std::string model;
  std::string weights_file;
  std::string prewarm_command;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, PlanRegion> regions;  // by key
  std::vector<PlanStage> stages;
};

Result<Plan> load_plan(const std::string& dir);

// `torch_version` is what libtorch was built as ("2.13.0").
Status check_plan(const Plan& plan, const std::string& torch_version);

}  // namespace kcache::regions
