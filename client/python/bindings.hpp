// Registration functions of the binding's parts (one file per C++ layer).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.hpp"

namespace kcache::python {

void bind_keys(pybind11::module_& m);
void bind_artifact(pybind11::module_& m);
void bind_client(pybind11::module_& m);
void bind_gpu(pybind11::module_& m);

// Raises kcache.KcacheError(code, message) for an error value: Python code
// sees ordinary exceptions, with the error code as `.code`.
[[noreturn]] void raise_error(const Error& e);

// Views a Python bytes object without copying. The span lives as long as `b`.
inline std::span<const std::uint8_t> bytes_span(const pybind11::bytes& b) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  PyBytes_AsStringAndSize(b.ptr(), &data, &size);
  return {reinterpret_cast<const std::uint8_t*>(data), static_cast<std::size_t>(size)};
}

inline pybind11::bytes to_bytes(const std::vector<std::uint8_t>& v) {
  return pybind11::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) raise_error(r.error());
  return std::move(r).value();
}

}  // namespace kcache::python
