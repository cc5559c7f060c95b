// The namespaces file (--namespaces FILE, docs/namespaces.md): which
// namespaces one kcache-server serves, and for each its tokens and their
// roles, quotas, trust policy, retention policy and read-through links.
// Read at start and on SIGHUP by the authorizer (tokens) and by the
// namespace registry (server/namespaces.hpp: stores, quotas, trust).
//
// Format: one JSON object (comments are not JSON; use "comment" fields):
//   {"namespaces": {
//      "<name>": {
//        "tokens": [{"token": "<16-512 chars>", "role": "write"},
//                   {"sha256": "<64 hex of a token>", "role": "read"}],
//        "anonymous_read": false,
//        "quota_bytes": "50GiB",            // or a number; absent/0: none
//        "quota_entries": 100000,           // absent/0: none
//        "trust": {"uploads": "signed", "keys": ["/etc/kcache/ci.pub"]},
//                                           // "any" (default) or "signed"
//        "retention": {"policy": "value", "window": "1d"},  // or "lru"
//        "read_through": ["ci"]             // other namespaces, read-only
//      }, …}}
// Names: 1–63 characters of [a-z0-9_-], starting with a letter or digit.
// "default" always exists (added with no tokens when the file omits it): it
// is the store a kcache from before namespaces used, opened unchanged.
// A token may have a role in several namespaces (one entry in each); the
// same token twice in one namespace is an error. Key files are read by the
// registry, not here; relative paths are relative to the file's folder.
// Errors name the namespace and field, never a token.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/namespace_name.hpp"
#include "common/result.hpp"
#include "server/http_front/authorizer.hpp"

namespace kcache::server {

inline constexpr const char* k_default_namespace = "default";

enum class RetentionPolicy { value, lru };

struct NamespaceSpec {
  std::string name;
  std::vector<TokenEntry> tokens;  // each with ns == name
  bool anonymous_read = false;
  std::uint64_t quota_bytes = 0;    // 0: no quota
  std::uint64_t quota_entries = 0;  // 0: no quota
  bool signed_only = false;
  std::vector<std::string> trusted_key_files;  // absolute paths
  RetentionPolicy retention = RetentionPolicy::value;
  std::int64_t value_window_ms = 24LL * 3600 * 1000;  // a day: bench/retention/README.md
  std::vector<std::string> read_through;  // namespace names, in lookup order
};


// Parses the file's text. `base_dir` resolves relative key paths.
// Errc::invalid_argument naming the namespace and field on any error:
// unknown fields, a bad name, a read_through to an unknown namespace or to
// itself, a malformed quota or window, a signed-only namespace without keys.
Result<std::vector<NamespaceSpec>> parse_namespace_file(std::string_view text, const std::string& base_dir);

// Reads and parses a file (io_error when it cannot be read).
Result<std::vector<NamespaceSpec>> load_namespace_file(const std::string& path);

}  // namespace kcache::server
