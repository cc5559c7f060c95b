#include "storage/disk/sidecar.hpp"

#include <nlohmann/json.hpp>

#include "keys/cache_key.hpp"

namespace kcache::storage::disk {

std::string encode_sidecar(const Sidecar& s) {
  const Entry& e = s.entry;
  nlohmann::json j = {
      {"v", 1},
      {"key", e.key},
      {"size", e.size},
      {"sha256", s.sha256},
      {"created_ms", e.created_ms},
      {"last_access_ms", e.last_access_ms},
      {"hits", e.hits},
      {"label", e.meta.label},
      {"target", e.meta.target},
      {"mode", e.meta.mode},
      {"dtype", e.meta.dtype},
      {"toolchain", e.meta.toolchain},
      {"compile_ms", e.meta.compile_ms},
      {"pinned", e.pinned},
  };
  return j.dump();
}

Result<Sidecar> decode_sidecar(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("v", 0) != 1) {
    return make_error(Errc::corrupt, "sidecar is not kcache metadata");
  }
  try {
    Sidecar s;
    Entry& e = s.entry;
    e.key = j.at("key").get<std::string>();
    e.size = j.at("size").get<std::uint64_t>();
    s.sha256 = j.at("sha256").get<std::string>();
    e.created_ms = j.at("created_ms").get<std::int64_t>();
    e.last_access_ms = j.at("last_access_ms").get<std::int64_t>();
    e.hits = j.at("hits").get<std::uint64_t>();
    e.meta.label = j.at("label").get<std::string>();
    e.meta.target = j.at("target").get<std::string>();
    e.meta.mode = j.at("mode").get<std::string>();
    e.meta.dtype = j.at("dtype").get<std::string>();
    e.meta.toolchain = j.at("toolchain").get<std::string>();
    e.meta.compile_ms = j.at("compile_ms").get<std::uint64_t>();
    e.pinned = j.contains("pinned") && j.at("pinned").get<bool>();  // absent before pins existed
    if (!keys::is_key_hex(e.key) || !keys::is_key_hex(s.sha256)) {
      return make_error(Errc::corrupt, "sidecar key or sha256 malformed");
    }
    return s;
  } catch (const nlohmann::json::exception& ex) {
    // nlohmann reports type errors only by exception; contained here.
    return make_error(Errc::corrupt, std::string("sidecar field: ") + ex.what());
  }
}

}  // namespace kcache::storage::disk
