// Namespace names (docs/namespaces.md), one grammar for the server's
// namespaces file, its stores (a disk folder, a Redis key prefix), the
// client's KCACHE_NAMESPACE (a node-tier folder) and the CLI: 1-63
// characters of [a-z0-9_-], the first a letter or a digit. Such a name is a
// safe path component and Redis key part, with no braces to move a hash tag.
// Thread safety: a pure function.
#pragma once

#include <string_view>

namespace kcache {

inline bool valid_namespace_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace kcache
