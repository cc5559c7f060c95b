#include <pybind11/pybind11.h>

#include "client/python/bindings.hpp"

namespace py = pybind11;

namespace kcache::python {

namespace {
py::object g_error_type;
}

void raise_error(const Error& e) {
  py::object exc = g_error_type(std::string(errc_name(e.code)) + ": " + e.message);
  exc.attr("code") = errc_name(e.code);
  PyErr_SetObject(g_error_type.ptr(), exc.ptr());
  throw py::error_already_set();
}

}  // namespace kcache::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "kcache's C++ core: cache keys, artifact bundles and the client";
  kcache::python::g_error_type = py::reinterpret_borrow<py::object>(
      PyErr_NewException("kcache._core.KcacheError", PyExc_RuntimeError, nullptr));
  m.attr("KcacheError") = kcache::python::g_error_type;
  kcache::python::bind_keys(m);
  kcache::python::bind_artifact(m);
  kcache::python::bind_client(m);
  kcache::python::bind_gpu(m);
}
