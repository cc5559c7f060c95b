// Paths of the disk backend's layout (see storage/disk/backend.hpp).
// Thread safety: immutable value.
#pragma once

#include <string>

namespace kcache::storage::disk {

struct Layout {
  std::string root;

  std::string objects() const { return root + "/objects"; }
  std::string tmp() const { return root + "/tmp"; }
  std::string quarantine() const { return root + "/quarantine"; }
  std::string lock_file() const { return root + "/LOCK"; }
  // The root of namespace `ns`'s own store (open_namespace_backend); never
  // read by the store at `root`.
  std::string namespaces() const { return root + "/namespaces"; }
  std::string namespace_root(const std::string& ns) const { return namespaces() + "/" + ns; }
  std::string object_dir(const std::string& key) const { return objects() + "/" + key.substr(0, 2); }
  std::string object(const std::string& key) const { return object_dir(key) + "/" + key; }
  std::string sidecar(const std::string& key) const { return object(key) + ".meta"; }
};

}  // namespace kcache::storage::disk
