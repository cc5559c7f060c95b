#include "client/config.hpp"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/namespace_name.hpp"
#include "common/units.hpp"

namespace kcache {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

Result<bool> parse_bool(const std::string& name, const std::string& v) {
  std::string s;
  for (char c : trim(v))
    s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  return make_error(Errc::invalid_argument, name + " must be 0/1/true/false, not '" + v + "'");
}

// A duration (common/units.hpp): "1500", "1.5s", "2m"; bare numbers are ms.
Result<int> parse_ms(const std::string& name, const std::string& v) {
  auto n = parse_duration_ms(trim(v));
  if (!n || *n > 86400000ull) {
    return make_error(Errc::invalid_argument, name + " must be a duration (1500, 1.5s, 2m), not '" + v + "'");
  }
  return static_cast<int>(*n);
}

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Errc::io_error, "cannot read token file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return trim(ss.str());
}

}  // namespace

Result<std::uint64_t> parse_size(const std::string& text) {
  if (auto n = parse_byte_size(text)) return *n;
  return make_error(Errc::invalid_argument, "bad size '" + text +
                                                "' (bytes, or with K, M, G, T or P: 4096, 512M, 1.5GiB)");
}

Status check_namespace(const std::string& ns) {
  // The server's grammar (common/namespace_name.hpp); it also names a folder of the node tier.
  if (valid_namespace_name(ns)) return Ok{};
  return make_error(Errc::invalid_argument,
                    "KCACHE_NAMESPACE must be 1-63 characters of [a-z0-9_-] starting with a letter or digit, not '" + ns +
                        "'");
}

Result<ClientConfig> ClientConfig::from_env() {
  return from_env([](const char* name) { return std::getenv(name); });
}

Result<ClientConfig> ClientConfig::from_env(const std::function<const char*(const char*)>& getenv) {
  ClientConfig c;
  auto get = [&](const char* name) -> std::optional<std::string> {
    const char* v = getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  if (auto v = get("KCACHE_URL")) c.url = trim(*v);
  if (auto v = get("KCACHE_TOKEN")) {
    std::string t = trim(*v);
    // One rule: '@' introduces a file. A token itself never starts with '@'.
    if (!t.empty() && t[0] == '@') {
      auto s = read_secret_file(t.substr(1));
      if (!s.ok()) return s.error();
      t = *s;
    }
    c.token = t;
  }
  if (auto v = get("KCACHE_NAMESPACE")) {
    c.ns = trim(*v);
    if (auto st = check_namespace(c.ns); !st) return st.error();
  }
  if (auto v = get("KCACHE_CLIENT_NAME")) c.client_name = trim(*v);
  if (auto v = get("KCACHE_CA_FILE")) c.ca_file = trim(*v);
  if (auto v = get("KCACHE_CLIENT_CERT")) c.client_cert = trim(*v);
  if (auto v = get("KCACHE_CLIENT_KEY")) c.client_key = trim(*v);
  if (auto v = get("KCACHE_LOCAL_DIR")) {
    std::string d = trim(*v);
    if (d == "none" || d == "off") {
      c.node_tier = false;
    } else {
      c.local_dir = d;
    }
  }
  if (auto v = get("KCACHE_LOCAL_MAX_BYTES"); v && !trim(*v).empty()) {
    auto n = parse_size(*v);
    if (!n.ok())
      return make_error(Errc::invalid_argument, "KCACHE_LOCAL_MAX_BYTES: " + n.error().message);
    c.local_max_bytes = *n;
  }
  if (auto v = get("KCACHE_MODE")) c.mode = trim(*v);
  if (auto v = get("KCACHE_TARGET")) c.target = trim(*v);
  if (auto v = get("KCACHE_READ_ONLY")) {
    auto b = parse_bool("KCACHE_READ_ONLY", *v);
    if (!b.ok()) return b.error();
    c.read_only = *b;
  }
  if (auto v = get("KCACHE_DISABLE")) {
    auto b = parse_bool("KCACHE_DISABLE", *v);
    if (!b.ok()) return b.error();
    c.disabled = *b;
  }
  if (auto v = get("KCACHE_TRUSTED_KEYS")) {
    std::string cur;
    for (char ch : *v + ":") {
      if (ch == ':' || ch == ',') {
        if (!trim(cur).empty()) c.trusted_keys.push_back(trim(cur));
        cur.clear();
      } else {
        cur.push_back(ch);
      }
    }
  }
  if (auto v = get("KCACHE_SIGNING_KEY")) c.signing_key = trim(*v);
  struct MsVar {
    const char* name;
    int* field;
  };
  for (MsVar m : {MsVar{"KCACHE_CONNECT_TIMEOUT_MS", &c.connect_timeout_ms},
                  MsVar{"KCACHE_REQUEST_TIMEOUT_MS", &c.request_timeout_ms},
                  MsVar{"KCACHE_WAIT_BUDGET_MS", &c.wait_budget_ms}}) {
    if (auto v = get(m.name); v && !trim(*v).empty()) {
      auto n = parse_ms(m.name, *v);
      if (!n.ok()) return n.error();
      *m.field = *n;
    }
  }
  if (auto v = get("KCACHE_MISS_LOG")) c.miss_log = trim(*v);
  if (auto v = get("KCACHE_CLIENT_LOG_LEVEL"); v && !trim(*v).empty()) c.log_level = trim(*v);
  return c;
}

std::string ClientConfig::describe() const {
  std::ostringstream o;
  o << "url=" << (url.empty() ? "(none)" : url) << " token=" << (token.empty() ? "(none)" : "<set>")
    << " tls_ca=" << (ca_file.empty() ? "(system)" : ca_file)
    << " mtls=" << (client_cert.empty() ? "no" : "yes")
    << " local_dir=" << (node_tier ? local_dir : std::string("(off)"))
    << " local_max_bytes=" << local_max_bytes << " read_only=" << read_only
    << " disabled=" << disabled << " trusted_keys=" << trusted_keys.size()
    << " signing_key=" << (signing_key.empty() ? "(none)" : "<set>");
  return o.str();
}

}  // namespace kcache
