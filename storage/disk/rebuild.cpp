#include "storage/disk/rebuild.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "keys/cache_key.hpp"
#include "storage/disk/files.hpp"
#include "storage/entry_query.hpp"

namespace kcache::storage::disk {
namespace {

constexpr std::string_view k_meta_suffix = ".meta";

bool ends_with_meta(const std::string& name) {
  return name.size() > k_meta_suffix.size() &&
         name.compare(name.size() - k_meta_suffix.size(), k_meta_suffix.size(), k_meta_suffix) == 0;
}

std::string read_text(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return {};
  return std::string(bytes->begin(), bytes->end());
}

}  // namespace

void quarantine_files(const Layout& layout, const std::string& key) {
  std::string base = layout.quarantine() + "/" + key + "." + std::to_string(now_ms());
  ::rename(layout.object(key).c_str(), base.c_str());
  ::rename(layout.sidecar(key).c_str(), (base + ".meta").c_str());
}

Result<RebuildResult> rebuild(const Layout& layout) {
  for (const auto& dir : {layout.root, layout.objects(), layout.tmp(), layout.quarantine()}) {
    if (auto s = make_dir(dir); !s) return s.error();
  }
  RebuildResult out;
  for (const auto& name : list_dir(layout.tmp())) {
    if (::unlink((layout.tmp() + "/" + name).c_str()) == 0) out.temp_files_removed++;
  }
  static constexpr char k_hex[] = "0123456789abcdef";
  for (int i = 0; i < 256; ++i) {
    std::string dir = layout.objects() + "/" + k_hex[i >> 4] + k_hex[i & 15];
    if (auto s = make_dir(dir); !s) return s.error();
    auto names = list_dir(dir);
    std::set<std::string> objects, sidecars;
    for (auto& n : names) {
      if (ends_with_meta(n)) {
        sidecars.insert(n.substr(0, n.size() - k_meta_suffix.size()));
      } else {
        objects.insert(n);
      }
    }
    for (const auto& key : objects) {
      if (sidecars.count(key) == 0 || !keys::is_key_hex(key)) {
        // An interrupted put (linked, never committed), or a stray file.
        if (::unlink((dir + "/" + key).c_str()) == 0) out.orphans_removed++;
      }
    }
    for (const auto& key : sidecars) {
      if (objects.count(key) == 0) {
        if (::unlink(layout.sidecar(key).c_str()) == 0) out.orphans_removed++;
        continue;
      }
      auto sidecar = decode_sidecar(read_text(layout.sidecar(key)));
      struct stat st {};
      bool size_ok = ::stat(layout.object(key).c_str(), &st) == 0 && sidecar &&
                     static_cast<std::uint64_t>(st.st_size) == sidecar->entry.size;
      if (!sidecar || sidecar->entry.key != key || !size_ok) {
        quarantine_files(layout, key);
        out.quarantined++;
        continue;
      }
      out.entries.push_back(std::move(sidecar.value()));
    }
  }
  if (out.orphans_removed + out.quarantined > 0) {
    std::fprintf(stderr, "kcache storage: %s: removed %llu incomplete entries, quarantined %llu\n",
                 layout.root.c_str(), static_cast<unsigned long long>(out.orphans_removed),
                 static_cast<unsigned long long>(out.quarantined));
  }
  return out;
}

}  // namespace kcache::storage::disk
