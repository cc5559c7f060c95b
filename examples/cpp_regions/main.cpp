// kcache-regions-run: a C++ process (no Python) that runs a causal LM as a
// sequence of AOTInductor regions fetched through kcache.
//
//   kcache-regions-run --plan DIR [--input ids.pt --output logits.pt]
//                      [--bench 1,4 --seq 32 --iters 20 --warmup 3]
//
// The plan (DIR/plan.json, DIR/weights.pt) comes from
// `python -m kcache.aoti_prewarm`; the cache from KCACHE_URL /
// KCACHE_LOCAL_DIR and the other KCACHE_* settings (docs/client.md). Prints
// one JSON report on stdout; errors go to stderr with exit status 2.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/headeronly/version.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "client/client.hpp"
#include "plan.hpp"
#include "region_fetch.hpp"
#include "regional_model.hpp"

namespace fs = std::filesystem;
using kcache::regions::Plan;

namespace {

struct Args {
  std::string plan, input, output, workdir;
  std::vector<int> bench;
  int seq = 32, iters = 20, warmup = 3;
};

[[noreturn]] void die(const std::string& msg) {
  std::cerr << "kcache-regions-run: error: " << msg << "\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(k + " needs a value");
      return argv[++i];
    };
    if (k == "--plan") a.plan = next();
    else if (k == "--input") a.input = next();
    else if (k == "--output") a.output = next();
    else if (k == "--workdir") a.workdir = next();
    else if (k == "--seq") a.seq = std::stoi(next());
    else if (k == "--iters") a.iters = std::stoi(next());
    else if (k == "--warmup") a.warmup = std::stoi(next());
    else if (k == "--bench") {
      std::stringstream s(next());
      for (std::string b; std::getline(s, b, ',');) a.bench.push_back(std::stoi(b));
    } else die("unknown argument " + k + " (see the comment at the top of main.cpp)");
  }
  if (a.plan.empty()) die("--plan DIR is required");
  return a;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die("cannot read " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_ms(kcache::regions::RegionalModel& model, int batch, const Args& a) {
  torch::manual_seed(batch);
  auto ids = torch::randint(0, 16, {batch, a.seq}, torch::kLong);
  for (int i = 0; i < a.warmup; ++i) model.forward({{"input_ids", ids}});
  std::vector<double> ms;
  for (int i = 0; i < a.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    model.forward({{"input_ids", ids}});
    ms.push_back(seconds_since(t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  c10::InferenceMode inference;
  const std::string torch_version = std::to_string(TORCH_VERSION_MAJOR) + "." +
                                    std::to_string(TORCH_VERSION_MINOR) + "." +
                                    std::to_string(TORCH_VERSION_PATCH);
  auto plan = kcache::regions::load_plan(a.plan);
  if (!plan.ok()) die(plan.error().message);
  if (auto s = kcache::regions::check_plan(*plan, torch_version); !s.ok()) die(s.error().message);
  auto client = kcache::Client::from_env();
  if (!client.ok()) die("kcache client: " + client.error().message);

  bool own_workdir = a.workdir.empty();
  if (own_workdir) {
    char tmpl[] = "/tmp/kcache-regions-XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp failed");
    a.workdir = tmpl;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto packages = kcache::regions::fetch_packages(**client, *plan, a.workdir);
  if (!packages.ok()) {
    if (own_workdir) fs::remove_all(a.workdir);
    die(packages.error().message);
  }
  double fetch_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  nlohmann::json report;
  try {
    kcache::regions::RegionalModel model(*plan, *packages);
    report["load_seconds"] = seconds_since(t0);
    report["stages"] = model.stage_count();
    if (!a.input.empty()) {
      auto in = torch::pickle_load(read_file(a.input)).toGenericDict();
      auto out = model.forward({{"input_ids", in.at("input_ids").toTensor()}});
      c10::Dict<std::string, at::Tensor> saved;
      for (std::size_t i = 0; i < out.size(); ++i) saved.insert(plan->outputs[i], out[i]);
      auto bytes = torch::pickle_save(saved);
      if (!a.output.empty()) std::ofstream(a.output, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    for (int b : a.bench) report["latency_ms"][std::to_string(b)] = median_ms(model, b, a);
  } catch (const std::exception& e) {
    if (own_workdir) fs::remove_all(a.workdir);
    die(e.what());
  }
  if (own_workdir) fs::remove_all(a.workdir);
  report["model"] = plan->model;
  report["regions"] = plan->regions.size();
  report["fetch_seconds"] = fetch_s;
  report["threads"] = at::get_num_threads();
  report["seq"] = a.seq;
  report["client"] = nlohmann::json::parse((*client)->stats_json());
  std::cout << report.dump() << std::endl;
  return 0;
}
