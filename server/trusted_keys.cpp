#include "server/trusted_keys.hpp"

#include <fstream>
#include <sstream>

namespace kcache::server {

Result<std::shared_ptr<const artifact::TrustStore>> TrustedKeys::read(const std::vector<std::string>& files) {
  if (files.empty()) return std::shared_ptr<const artifact::TrustStore>();
  auto store = std::make_shared<artifact::TrustStore>();
  constexpr std::string_view k_begin = "-----BEGIN PUBLIC KEY-----";
  constexpr std::string_view k_end = "-----END PUBLIC KEY-----";
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(Errc::io_error, "cannot read trusted key file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::size_t pos = 0, blocks = 0;
    while ((pos = text.find(k_begin, pos)) != std::string::npos) {
      auto end = text.find(k_end, pos);
      if (end == std::string::npos) return make_error(Errc::invalid_argument, path + ": unterminated PEM block");
      end += k_end.size();
      auto added = store->add_public_pem(std::string_view(text).substr(pos, end - pos));
      if (!added) return make_error(added.error().code, path + ": " + added.error().message);
      ++blocks;
      pos = end;
    }
    if (blocks == 0) return make_error(Errc::invalid_argument, path + ": no PUBLIC KEY PEM block");
  }
  return std::shared_ptr<const artifact::TrustStore>(std::move(store));
}

Result<std::unique_ptr<TrustedKeys>> TrustedKeys::load(std::vector<std::string> files) {
  auto store = read(files);
  if (!store) return store.error();
  std::unique_ptr<TrustedKeys> out(new TrustedKeys(std::move(files)));
  out->store_ = std::move(*store);
  return out;
}

std::shared_ptr<const artifact::TrustStore> TrustedKeys::snapshot() const {
  std::lock_guard lock(mu_);
  return store_;
}

Status TrustedKeys::reload() {
  auto store = read(files_);
  if (!store) return store.error();
  std::lock_guard lock(mu_);
  store_ = std::move(*store);
  return Ok{};
}

std::size_t TrustedKeys::size() const {
  auto s = snapshot();
  return s ? s->size() : 0;
}

}  // namespace kcache::server
