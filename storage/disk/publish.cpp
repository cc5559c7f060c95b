#include "storage/disk/publish.hpp"

#include <unistd.h>

#include <cerrno>

#include "storage/disk/files.hpp"

namespace kcache::storage::disk {
namespace {

std::span<const std::uint8_t> as_bytes(const std::string& text) {
  return std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

std::string tmp_name(const Layout& layout, const std::string& key, const std::string& token,
                     const char* suffix) {
  return layout.tmp() + "/" + key + "." + token + suffix;
}

}  // namespace

Result<PutOutcome> publish(const Layout& layout, const Sidecar& sc, std::span<const std::uint8_t> bytes,
                           PutFaultHook* hook) {
  const std::string& key = sc.entry.key;
  std::string token = random_token();
  std::string tmp_obj = tmp_name(layout, key, token, ".obj");
  std::string tmp_meta = tmp_name(layout, key, token, ".meta");
  if (auto s = write_file_synced(tmp_obj, bytes); !s) return s.error();
  if (auto s = write_file_synced(tmp_meta, as_bytes(encode_sidecar(sc))); !s) {
    ::unlink(tmp_obj.c_str());
    return s.error();
  }
  if (hook != nullptr) hook->before_publish(key);
  // link() publishes only if absent; rename() would silently overwrite.
  if (::link(tmp_obj.c_str(), layout.object(key).c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_obj.c_str());
    ::unlink(tmp_meta.c_str());
    if (err == EEXIST) return PutOutcome::already_present;
    return errno_error("publish " + key, err);
  }
  ::unlink(tmp_obj.c_str());
  if (::rename(tmp_meta.c_str(), layout.sidecar(key).c_str()) != 0) {
    int err = errno;
    ::unlink(layout.object(key).c_str());
    ::unlink(tmp_meta.c_str());
    return errno_error("commit " + key, err);
  }
  Status synced = Ok{};
  if (int err = hook != nullptr ? hook->dir_sync_errno(key) : 0; err != 0) {
    synced = errno_error("fsync dir " + layout.object_dir(key), err);
  } else {
    synced = fsync_dir(layout.object_dir(key));
  }
  if (!synced) {
    // Not known to be durable, so not stored: take the entry back out
    // (sidecar first, as remove() does). Left in place, it was an entry
    // that put() called present (link: EEXIST) and get() absent (not
    // indexed) until a restart.
    ::unlink(layout.sidecar(key).c_str());
    ::unlink(layout.object(key).c_str());
    return synced.error();
  }
  return PutOutcome::stored;
}

Status replace_sidecar(const Layout& layout, const Sidecar& sc, bool& replaced) {
  const std::string& key = sc.entry.key;
  std::string tmp = tmp_name(layout, key, random_token(), ".meta");
  if (auto s = write_file_synced(tmp, as_bytes(encode_sidecar(sc))); !s) return s.error();
  if (::rename(tmp.c_str(), layout.sidecar(key).c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errno_error("replace sidecar of " + key, err);
  }
  replaced = true;
  return fsync_dir(layout.object_dir(key));
}

std::vector<bool> write_back(const Layout& layout, const std::vector<Sidecar>& sidecars) {
  std::vector<std::string> written(sidecars.size());  // tmp path, or empty when it could not be written
  for (std::size_t i = 0; i < sidecars.size(); ++i) {
    std::string tmp = tmp_name(layout, sidecars[i].entry.key, random_token(), ".meta");
    if (write_file_synced(tmp, as_bytes(encode_sidecar(sidecars[i])), /*sync=*/false)) written[i] = std::move(tmp);
  }
  const bool durable = static_cast<bool>(sync_filesystem(layout.tmp()));
  std::vector<bool> replaced(sidecars.size(), false);
  for (std::size_t i = 0; i < sidecars.size(); ++i) {
    if (written[i].empty()) continue;
    if (durable && ::rename(written[i].c_str(), layout.sidecar(sidecars[i].entry.key).c_str()) == 0) {
      replaced[i] = true;
    } else {
      ::unlink(written[i].c_str());
    }
  }
  return replaced;
}

}  // namespace kcache::storage::disk
