// Registration functions of the binding's parts (one file per C++ layer).
#pragma once

#include <pybind11/pybind11.h>

#include "common/result.hpp"

namespace kcache::python {

void bind_keys(pybind11::module_& m);
void bind_artifact(pybind11::module_& m);
void bind_client(pybind11::module_& m);

// Raises kcache.KcacheError(code, message) for an error value: Python code
// sees ordinary exceptions, with the error code as `.code`.
[[noreturn]] void raise_error(const Error& e);

template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) raise_error(r.error());
  return std::move(r).value();
}

}  // namespace kcache::python
