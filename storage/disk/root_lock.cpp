#include "storage/disk/root_lock.hpp"

#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "storage/disk/files.hpp"
#include "storage/disk/rebuild.hpp"

namespace kcache::storage::disk {

Result<LockedRoot> lock_root(const Layout& layout) {
  if (auto s = make_dir(layout.root); !s) return s.error();
  int fd = ::open(layout.lock_file().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("open " + layout.lock_file(), errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return make_error(Errc::unavailable, layout.root + " is in use by another kcache process");
  }
  auto rebuilt = rebuild(layout);
  if (!rebuilt) {
    ::close(fd);
    return rebuilt.error();
  }
  return LockedRoot{fd, std::move(rebuilt->entries)};
}

}  // namespace kcache::storage::disk
