// open_backend(): the URI dispatcher. Configuration errors are values
// (Errc::invalid_argument, or what opening the store reported).
#include "storage/backend.hpp"
#include "storage/disk/backend.hpp"
#include "storage/fault_hook.hpp"
#include "storage/memory/backend.hpp"
#include "storage/redis/backend.hpp"

namespace kcache::storage {

Result<std::unique_ptr<Backend>> open_backend(const std::string& uri, std::uint64_t capacity_bytes) {
  if (uri == "memory:" || uri == "memory") return make_memory_backend(capacity_bytes);
  if (uri.rfind("disk:", 0) == 0) {
    DiskOptions opts;
    opts.root = uri.substr(5);
    opts.capacity_bytes = capacity_bytes;
    opts.fault_hook = fault_hook_from_env();
    return open_disk_backend(opts);
  }
  if (uri.rfind("redis://", 0) == 0) {
    auto opts = parse_redis_url(uri);
    if (!opts) return opts.error();
    opts->capacity_bytes = capacity_bytes;
    opts->fault_hook = fault_hook_from_env();
    return open_redis_backend(*opts);
  }
  if (uri.rfind("redis-cluster://", 0) == 0) {
    auto opts = parse_redis_cluster_url(uri);
    if (!opts) return opts.error();
    opts->node.capacity_bytes = capacity_bytes;
    opts->node.fault_hook = fault_hook_from_env();
    return open_redis_cluster_backend(*opts);
  }
  return make_error(Errc::invalid_argument,
                    "unknown storage URI (want memory:, disk:PATH, redis://host:port/db or "
                    "redis-cluster://host:port,host:port/): " +
                        uri);
}

}  // namespace kcache::storage
