#include "server/resp/resp_keyspace.hpp"

#include <cctype>
#include <string_view>

#include "common/hex.hpp"
#include "common/sha256.hpp"

namespace kcache::server::resp {

std::string storage_key(std::string_view resp_key) {
  std::string material("kcache-resp-v1");
  material.push_back('\0');
  material.append(resp_key);
  const auto d = sha256(std::string_view(material));
  return to_hex(d);
}

std::string cache_type(std::string_view k) {
  // A fixed set: a label made from client bytes would let any client grow
  // /metrics without bound.
  static constexpr std::string_view k_pt2[] = {"pt2:fx-graph-v1", "pt2:autograd-experimental",
                                               "pt2:bundled-autotune-v1", "pt2:dynamo-pgo"};
  if (k.rfind("pt2:", 0) == 0) {
    const auto end = k.find("::");
    const std::string_view t = k.substr(0, end);
    for (auto known : k_pt2) {
      if (t == known) return std::string(known);
    }
    // Inductor's remote autotune cache names each entry pt2:<64 hex>::…
    const std::string_view id = t.substr(4);
    const bool hex = id.size() == 64 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
    return hex ? "pt2:autotune" : "pt2:other";
  }
  if (k.rfind("triton:", 0) == 0) return "triton";
  return "other";
}

storage::EntryMeta entry_meta(std::string_view resp_key) {
  storage::EntryMeta m;
  std::string label;
  for (char c : resp_key.substr(0, 256)) {
    label.push_back(std::isprint(static_cast<unsigned char>(c)) ? c : '?');
  }
  m.label = std::move(label);
  m.target = cache_type(resp_key);
  m.mode = "resp";
  m.dtype = "-";
  m.toolchain = "-";
  return m;
}

namespace {
constexpr std::string_view k_magic = "KCRESP1\n";
}

std::vector<std::uint8_t> wrap_value(std::string_view value) {
  std::vector<std::uint8_t> out;
  out.reserve(k_magic.size() + value.size());
  out.insert(out.end(), k_magic.begin(), k_magic.end());
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

std::optional<std::string_view> unwrap_value(const std::vector<std::uint8_t>& stored) {
  const std::string_view all(reinterpret_cast<const char*>(stored.data()), stored.size());
  if (all.substr(0, k_magic.size()) != k_magic) return std::nullopt;
  return all.substr(k_magic.size());
}

void Expiries::set_limit(std::size_t limit) {
  std::lock_guard lock(mu_);
  limit_ = limit;
}

bool Expiries::has_room(const std::string& skey) const {
  std::lock_guard lock(mu_);
  return at_.size() < limit_ || at_.count(skey) != 0;
}

std::vector<std::string> Expiries::due(std::size_t max) const {
  const auto now = Clock::now();
  std::vector<std::string> out;
  std::lock_guard lock(mu_);
  for (const auto& [skey, when] : at_) {
    if (out.size() >= max) break;
    if (now >= when) out.push_back(skey);
  }
  return out;
}

std::size_t Expiries::size() const {
  std::lock_guard lock(mu_);
  return at_.size();
}

void Expiries::set(const std::string& skey, Clock::time_point when) {
  std::lock_guard lock(mu_);
  at_[skey] = when;
}

void Expiries::clear(const std::string& skey) {
  std::lock_guard lock(mu_);
  at_.erase(skey);
}

bool Expiries::has(const std::string& skey) const {
  std::lock_guard lock(mu_);
  return at_.count(skey) != 0;
}

bool Expiries::expired(const std::string& skey) const {
  std::lock_guard lock(mu_);
  auto it = at_.find(skey);
  return it != at_.end() && Clock::now() >= it->second;
}

}  // namespace kcache::server::resp
