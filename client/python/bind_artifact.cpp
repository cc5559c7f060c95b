#include <pybind11/stl.h>

#include "artifact/bundle.hpp"
#include "artifact/cubin.hpp"
#include "artifact/signing.hpp"
#include "client/python/bindings.hpp"

namespace py = pybind11;

namespace kcache::python {

namespace {

nlohmann::json parse_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) raise_error(make_error(Errc::invalid_argument, "manifest is not JSON"));
  return j;
}

artifact::TrustStore trust_from(const std::vector<std::string>& pems) {
  artifact::TrustStore trust;
  for (const auto& pem : pems) unwrap(trust.add_public_pem(pem));
  return trust;
}

}  // namespace

void bind_artifact(py::module_& m) {
  m.def(
      "write_bundle",
      [](const std::string& manifest, const std::vector<std::pair<std::string, py::bytes>>& sections,
         std::optional<std::string> signing_key_pem, int zstd_level) {
        std::vector<artifact::Section> secs;
        for (const auto& [name, data] : sections) {
          auto s = bytes_span(data);
          secs.push_back({name, {s.begin(), s.end()}});
        }
        auto j = parse_json(manifest);
        std::optional<artifact::SigningKey> signer;
        if (signing_key_pem) signer = unwrap(artifact::SigningKey::from_private_pem(*signing_key_pem));
        Result<std::vector<std::uint8_t>> r = make_error(Errc::internal, "unset");
        {
          py::gil_scoped_release release;
          r = artifact::write_bundle(j, secs, signer ? &*signer : nullptr, zstd_level);
        }
        return to_bytes(unwrap(std::move(r)));
      },
      py::arg("manifest"), py::arg("sections"), py::arg("signing_key_pem") = std::nullopt,
      py::arg("zstd_level") = 3,
      "Bundle bytes from a JSON manifest (with \"key\") and (name, bytes) sections.");
  m.def(
      "read_bundle",
      [](const py::bytes& data, std::optional<std::string> expected_key,
         const std::vector<std::string>& trusted_keys, bool require_signature) {
        auto trust = trust_from(trusted_keys);
        artifact::ReadOptions opts;
        opts.expected_key = std::move(expected_key);
        opts.trust = trusted_keys.empty() && !require_signature ? nullptr : &trust;
        opts.require_signature = require_signature;
        auto span = bytes_span(data);
        Result<artifact::Bundle> r = make_error(Errc::internal, "unset");
        {
          py::gil_scoped_release release;
          r = artifact::read_bundle(span, opts);
        }
        auto bundle = unwrap(std::move(r));
        std::vector<std::pair<std::string, py::bytes>> sections;
        for (const auto& s : bundle.sections) sections.emplace_back(s.name, to_bytes(s.data));
        return py::make_tuple(bundle.manifest.dump(), sections, bundle.signer_key_id);
      },
      py::arg("data"), py::kw_only(), py::arg("expected_key") = std::nullopt,
      py::arg("trusted_keys") = std::vector<std::string>{}, py::arg("require_signature") = false,
      "Verifies a bundle (trailer, then signature) → (manifest JSON, [(name, bytes)], signer id).");
  m.def(
      "inspect_bundle",
      [](const py::bytes& data) {
        auto s = unwrap(artifact::inspect_bundle(bytes_span(data)));
        py::list sections;
        for (const auto& sec : s.sections) {
          sections.append(py::make_tuple(sec.name, sec.compressed_bytes, sec.uncompressed_bytes));
        }
        return py::make_tuple(s.manifest.dump(), sections, s.signer_key_id, s.digest_hex);
      },
      py::arg("data"), "Structure and trailer check without decompressing.");
  m.def(
      "generate_signing_key",
      [] {
        auto kp = unwrap(artifact::generate_key_pair());
        return py::make_tuple(kp.private_pem, kp.public_pem);
      },
      "A new Ed25519 key pair as (private PEM, public PEM).");
  m.def(
      "cubin_sm_arch",
      [](const py::bytes& data) { return unwrap(artifact::read_cubin_arch(bytes_span(data))).sm; },
      py::arg("data"), "The SM number (80, 90, …) of a CUDA cubin.");
}

}  // namespace kcache::python
