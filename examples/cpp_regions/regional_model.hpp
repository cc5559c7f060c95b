// A model's forward as the plan's sequence of AOTInductor regions.
//
// Contract: one package loader per stage (stages that share a region share
// its package file, each with its own loader), each stage's package
// constants bound to that stage's own tensors from the plan's weights file,
// user-managed (the loader does not copy them). forward() takes the plan's
// input tensors by name and returns its outputs in the plan's order.
// Errors are libtorch's exceptions (c10::Error) or std::runtime_error with
// the stage named.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "plan.hpp"
#include "region_fetch.hpp"

namespace kcache::regions {

class RegionalModel {
 public:
  RegionalModel(const Plan& plan, const std::map<std::string, FetchedPackage>& packages);
  std::vector<at::Tensor> forward(const std::map<std::string, at::Tensor>& inputs);
  std::size_t stage_count() const { return stages_.size(); }

 private:
  struct Stage {
    const PlanStage* plan;
    std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
    std::unordered_map<std::string, at::Tensor> constants;  // kept alive: user-managed
  };
  const Plan& plan_;
  std::unordered_map<std::string, at::Tensor> weights_;
  std::vector<Stage> stages_;
};

// Every tensor of a torch.save'd plain dict (the plan's weights.pt).
std::unordered_map<std::string, at::Tensor> load_weights(const std::string& path);

}  // namespace kcache::regions
