// Writes a handful of valid bundles into a directory as the fuzz seed
// corpus: unsigned and signed, empty and multi-section, one with an
// explanation-like manifest. Usage: bundle_seed_gen DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "artifact/bundle.hpp"
#include "fuzz/fuzz_key.hpp"

using namespace kcache::artifact;

namespace {

bool write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return out.good();
}

std::vector<std::uint8_t> text(std::string_view s) { return {s.begin(), s.end()}; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  auto key = SigningKey::from_private_pem(kcache::fuzz::k_fuzz_private_pem);
  if (!key) {
    std::fprintf(stderr, "fuzz key: %s\n", key.error().message.c_str());
    return 1;
  }
  const std::string k(kcache::fuzz::k_fuzz_cache_key);
  nlohmann::json rich = {{"key", k},
                         {"label", "model.layers.3"},
                         {"producer", "seed"},
                         {"compile_seconds", 41.5},
                         {"explanation", {{"torch", "2.9.0"}, {"archs", {"sm_90"}}}}};
  std::vector<Section> several = {{"empty", {}},
                                  {"megacache", text("torch mega-cache bytes, repeated repeated repeated")},
                                  {"zeros", std::vector<std::uint8_t>(4096, 0)}};
  struct Seed {
    const char* name;
    nlohmann::json manifest;
    std::vector<Section> sections;
    const SigningKey* signer;
  };
  const Seed seeds[] = {
      {"unsigned-empty", {{"key", k}}, {}, nullptr},
      {"unsigned-several", rich, several, nullptr},
      {"signed-one", {{"key", k}}, {{"s", text("signed payload")}}, &*key},
      {"signed-several", rich, several, &*key},
  };
  for (const Seed& s : seeds) {
    auto bytes = write_bundle(s.manifest, s.sections, s.signer);
    if (!bytes || !write_file(std::string(argv[1]) + "/seed-" + s.name, *bytes)) {
      std::fprintf(stderr, "cannot write seed %s\n", s.name);
      return 1;
    }
  }
  return 0;
}
