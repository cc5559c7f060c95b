// SHA-256 through OpenSSL's EVP interface.
// Thread safety: each Sha256 object is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kcache {

using Digest = std::array<std::uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const std::uint8_t> bytes);
  void update(std::string_view bytes);
  // Finishes the hash; the object must not be updated afterwards.
  Digest finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Digest sha256(std::span<const std::uint8_t> bytes);
Digest sha256(std::string_view bytes);

}  // namespace kcache
