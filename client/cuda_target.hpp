// The GPU target a process compiles for, as the C++ client sees it:
// "cuda:sm_XX" from the CUDA driver API, loaded with dlopen so the client
// neither links nor needs CUDA (docs/keys.md, "target").
//
// Contract:
//  - detect_cuda_target() asks the driver for device 0's compute capability
//    (CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR). Device 0 because
//    every rank must see its own GPU as cuda:0 (docs/keys.md, "Device
//    indices"); the index never appears in the result.
//  - The driver is libcuda.so.1, or the file KCACHE_CUDA_DRIVER names (tests
//    load a fake one). Errors are values, never exceptions: unavailable
//    "no CUDA driver (…)" when it cannot be loaded or lacks a symbol,
//    unavailable "CUDA driver: cuInit failed (error N)", not_found "no CUDA
//    device (cuDeviceGetCount = 0)", internal for a failing attribute query.
//  - resolve_cuda_target(override) returns `override` with surrounding
//    whitespace trimmed when that leaves anything (KCACHE_TARGET), else the
//    detected target.
// Thread safety: callable from any thread; each call asks the driver again
// (callers cache). The driver stays loaded once opened.
#pragma once

#include <string>
#include <string_view>

#include "client/export.hpp"
#include "common/result.hpp"

namespace kcache {

struct CudaTarget {
  std::string target;  // "cuda:sm_90"
  int major = 0;
  int minor = 0;
  int device_count = 0;
  std::string driver;  // the library path that answered
};

KCACHE_CLIENT_API Result<CudaTarget> detect_cuda_target();

KCACHE_CLIENT_API Result<std::string> resolve_cuda_target(std::string_view override_target);

}  // namespace kcache
