#include <pybind11/stl.h>

#include "client/python/bindings.hpp"
#include "keys/cache_key.hpp"
#include "keys/explanation.hpp"

namespace py = pybind11;

namespace kcache::python {

namespace {

keys::KeyFields fields_from_dict(const std::map<std::string, py::bytes>& d) {
  keys::KeyFields f;
  for (keys::Field field : keys::k_all_fields) {
    auto it = d.find(keys::field_name(field));
    if (it != d.end()) f.get(field) = std::string(it->second);
  }
  for (const auto& [name, _] : d) {
    bool known = false;
    for (keys::Field field : keys::k_all_fields) known = known || name == keys::field_name(field);
    if (!known) raise_error(make_error(Errc::invalid_argument, "unknown key field '" + name + "'"));
  }
  return f;
}

}  // namespace

void bind_keys(py::module_& m) {
  m.attr("KEY_SCHEMA") = std::string(keys::k_schema_version);
  m.def(
      "compute_key",
      [](const std::map<std::string, py::bytes>& fields) {
        return unwrap(keys::compute_key(fields_from_dict(fields))).hex();
      },
      py::arg("fields"),
      "64-hex cache key of the fields {region, dtype, target, mode, toolchain, env[, schema]}"
      " (values as bytes).");
  m.def(
      "explain_key",
      [](const std::map<std::string, py::bytes>& fields, const std::string& label,
         const std::map<std::string, std::string>& details) {
        return unwrap(keys::explain(fields_from_dict(fields), label, details)).to_json().dump();
      },
      py::arg("fields"), py::arg("label"), py::arg("details") = std::map<std::string, std::string>{},
      "The key's explanation as JSON text: key, label, each field's sub-hash.");
  m.def(
      "diff_explanations",
      [](const std::string& left, const std::string& right) {
        auto parse = [](const std::string& text) {
          auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
          return unwrap(keys::Explanation::from_json(j));
        };
        std::vector<std::string> names;
        for (const auto& d : keys::diff(parse(left), parse(right))) names.push_back(d.field);
        return names;
      },
      py::arg("left"), py::arg("right"), "Names of the fields whose sub-hashes differ.");
  m.def("is_key", [](const std::string& s) { return keys::is_key_hex(s); }, py::arg("text"));
}

}  // namespace kcache::python
