// GPU targets in the binding: the CUDA driver's target (C++ and Python keys
// must agree, tests/python/compile/test_cuda_target.py) and the cubin listing and
// check that bundles carry (docs/artifact.md).
#include <pybind11/stl.h>

#include <cstdlib>

#include "artifact/cubin_listing.hpp"
#include "client/cuda_target.hpp"
#include "client/python/bindings.hpp"

namespace py = pybind11;

namespace kcache::python {

namespace {

std::vector<artifact::Section> to_sections(const std::vector<std::pair<std::string, py::bytes>>& in) {
  std::vector<artifact::Section> out;
  for (const auto& [name, data] : in) {
    auto s = bytes_span(data);
    out.push_back({name, {s.begin(), s.end()}});
  }
  return out;
}

}  // namespace

void bind_gpu(py::module_& m) {
  m.def(
      "cuda_target",
      [](bool use_override) {
        const char* env = std::getenv("KCACHE_TARGET");
        std::string override_target = use_override && env ? env : "";
        Result<std::string> r = make_error(Errc::internal, "unset");
        {
          py::gil_scoped_release release;
          r = resolve_cuda_target(override_target);
        }
        return unwrap(std::move(r));
      },
      py::arg("use_override") = true,
      "'cuda:sm_XX' of device 0 from the CUDA driver (dlopen of libcuda.so.1 or "
      "$KCACHE_CUDA_DRIVER); KCACHE_TARGET wins when set and use_override. Raises KcacheError "
      "(unavailable: no CUDA driver / cuInit failed; not_found: no CUDA device).");
  m.def(
      "cuda_device_info",
      [] {
        auto t = unwrap(detect_cuda_target());
        py::dict d;
        d["target"] = t.target;
        d["major"] = t.major;
        d["minor"] = t.minor;
        d["device_count"] = t.device_count;
        d["driver"] = t.driver;
        return d;
      },
      "What the CUDA driver reports for device 0 (no override).");
  m.def(
      "list_cubins",
      [](const std::vector<std::pair<std::string, py::bytes>>& sections) {
        auto secs = to_sections(sections);
        return artifact::cubins_json(artifact::list_cubins(secs)).dump();
      },
      py::arg("sections"),
      "JSON list [{name, arch}] of the (name, bytes) pairs that are CUDA cubins.");
  m.def(
      "check_cubins",
      [](const std::string& manifest, const std::vector<std::pair<std::string, py::bytes>>& sections,
         const std::string& target) {
        auto j = nlohmann::json::parse(manifest, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) raise_error(make_error(Errc::invalid_argument, "manifest is not JSON"));
        auto secs = to_sections(sections);
        unwrap(artifact::check_cubins_for_target(j, secs, target));
      },
      py::arg("manifest"), py::arg("sections"), py::arg("target"),
      "Raises KcacheError(key_mismatch) when a listed cubin or a cubin section is not for "
      "`target` ('cuda:sm_90'); checks nothing for a non-CUDA target.");
}

}  // namespace kcache::python
