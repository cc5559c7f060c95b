#include "client/cuda_target.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace kcache {

namespace {

// The four driver entry points, with the driver's own C types spelled as
// ints (CUresult, CUdevice and CUdevice_attribute are all int-sized enums
// or ints in cuda.h).
using CuInit = int (*)(unsigned int);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);

constexpr int k_attr_cc_major = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int k_attr_cc_minor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

std::string driver_path() {
  const char* v = std::getenv("KCACHE_CUDA_DRIVER");
  return v && *v ? v : "libcuda.so.1";
}

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

Result<CudaTarget> detect_cuda_target() {
  CudaTarget out;
  out.driver = driver_path();
  void* lib = dlopen(out.driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return make_error(Errc::unavailable,
                      "no CUDA driver (" + std::string(why ? why : out.driver) + ")");
  }
  auto init = symbol<CuInit>(lib, "cuInit");
  auto count = symbol<CuDeviceGetCount>(lib, "cuDeviceGetCount");
  auto get = symbol<CuDeviceGet>(lib, "cuDeviceGet");
  auto attr = symbol<CuDeviceGetAttribute>(lib, "cuDeviceGetAttribute");
  if (!init || !count || !get || !attr) {
    return make_error(Errc::unavailable,
                      "no CUDA driver (" + out.driver + " lacks the driver API entry points)");
  }
  if (int rc = init(0); rc != 0) {
    return make_error(Errc::unavailable,
                      "CUDA driver: cuInit failed (error " + std::to_string(rc) + ")");
  }
  if (int rc = count(&out.device_count); rc != 0) {
    return make_error(Errc::internal,
                      "CUDA driver: cuDeviceGetCount failed (error " + std::to_string(rc) + ")");
  }
  if (out.device_count <= 0) {
    return make_error(Errc::not_found, "no CUDA device (cuDeviceGetCount = 0)");
  }
  int device = 0;
  if (int rc = get(&device, 0); rc != 0) {
    return make_error(Errc::internal,
                      "CUDA driver: cuDeviceGet(0) failed (error " + std::to_string(rc) + ")");
  }
  int rc_major = attr(&out.major, k_attr_cc_major, device);
  int rc_minor = attr(&out.minor, k_attr_cc_minor, device);
  if (rc_major != 0 || rc_minor != 0 || out.major <= 0 || out.minor < 0 || out.minor > 9) {
    return make_error(Errc::internal, "CUDA driver: no compute capability for device 0");
  }
  out.target = "cuda:sm_" + std::to_string(out.major) + std::to_string(out.minor);
  return out;
}

Result<std::string> resolve_cuda_target(std::string_view override_target) {
  // Trimmed as keyfields.py trims it, so " cuda:sm_90 " keys and checks as
  // "cuda:sm_90" on both sides.
  constexpr std::string_view space = " \t\n\v\f\r";
  auto first = override_target.find_first_not_of(space);
  if (first != std::string_view::npos) {
    auto last = override_target.find_last_not_of(space);
    return std::string(override_target.substr(first, last - first + 1));
  }
  auto t = detect_cuda_target();
  if (!t.ok()) return t.error();
  return t->target;
}

}  // namespace kcache
