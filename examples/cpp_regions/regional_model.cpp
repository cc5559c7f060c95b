#include "regional_model.hpp"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include <torch/serialize.h>

namespace kcache::regions {

std::unordered_map<std::string, at::Tensor> load_weights(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read weights " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  c10::IValue v = torch::pickle_load(bytes);
  if (!v.isGenericDict()) throw std::runtime_error(path + " is not a dict of tensors");
  std::unordered_map<std::string, at::Tensor> out;
  for (const auto& kv : v.toGenericDict()) out.emplace(kv.key().toStringRef(), kv.value().toTensor());
  return out;
}

RegionalModel::RegionalModel(const Plan& plan, const std::map<std::string, FetchedPackage>& packages)
    : plan_(plan), weights_(load_weights(plan.dir + "/" + plan.weights_file)) {
  for (const auto& ps : plan.stages) {
    const FetchedPackage& pkg = packages.at(ps.key);
    Stage st{&ps, std::make_unique<torch::inductor::AOTIModelPackageLoader>(pkg.path), {}};
    for (const auto& fqn : st.loader->get_constant_fqns()) {
      auto name = ps.constants.find(fqn);
      if (name == ps.constants.end()) {
        throw std::runtime_error("stage " + ps.name + ": the plan binds nothing to constant " + fqn);
      }
      auto w = weights_.find(name->second);
      if (w == weights_.end()) {
        throw std::runtime_error("stage " + ps.name + ": weights lack " + name->second);
      }
      st.constants.emplace(fqn, w->second);
    }
    st.loader->load_constants(st.constants, /*use_inactive=*/false, /*check_full_update=*/true,
                              /*user_managed=*/true);
    stages_.push_back(std::move(st));
  }
}

std::vector<at::Tensor> RegionalModel::forward(const std::map<std::string, at::Tensor>& inputs) {
  std::map<std::string, at::Tensor> env = inputs;
  for (auto& st : stages_) {
    std::vector<at::Tensor> args;
    for (const auto& name : st.plan->inputs) args.push_back(env.at(name));
    std::vector<at::Tensor> outs = st.loader->run(args);
    if (outs.size() != st.plan->outputs.size()) {
      throw std::runtime_error("stage " + st.plan->name + " returned " + std::to_string(outs.size()) +
                               " tensors, the plan names " + std::to_string(st.plan->outputs.size()));
    }
    for (std::size_t i = 0; i < outs.size(); ++i) env[st.plan->outputs[i]] = std::move(outs[i]);
  }
  std::vector<at::Tensor> result;
  for (const auto& name : plan_.outputs) result.push_back(env.at(name));
  return result;
}

}  // namespace kcache::regions
