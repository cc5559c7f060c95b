// open_backend(): the URI dispatcher, and open_namespace_backend(): the
// store of a namespace beside it. Configuration errors are values
// (Errc::invalid_argument, or what opening the store reported).
#include <optional>

#include "common/namespace_name.hpp"
#include "storage/backend.hpp"
#include "storage/disk/backend.hpp"
#include "storage/disk/files.hpp"
#include "storage/disk/layout.hpp"
#include "storage/fault_hook.hpp"
#include "storage/memory/backend.hpp"
#include "storage/redis/backend.hpp"

namespace kcache::storage {
namespace {

bool is_memory(const std::string& uri) { return uri == "memory:" || uri == "memory"; }

Result<std::unique_ptr<Backend>> open_disk(const std::string& root, std::uint64_t capacity_bytes) {
  DiskOptions opts;
  opts.root = root;
  opts.capacity_bytes = capacity_bytes;
  opts.fault_hook = fault_hook_from_env();
  return open_disk_backend(opts);
}

// The Redis keys of namespace `ns` (storage/redis/key_scheme.hpp).
std::string namespace_prefix(const std::string& ns) { return "kcache:ns:" + ns + ":"; }

// A redis:// or redis-cluster:// store whose keys start with `key_prefix`
// (empty: RedisOptions' default); nullopt for any other URI.
std::optional<Result<std::unique_ptr<Backend>>> open_redis(const std::string& uri, std::uint64_t capacity_bytes,
                                                           const std::string& key_prefix) {
  if (uri.rfind("redis://", 0) == 0) {
    auto opts = parse_redis_url(uri);
    if (!opts) return Result<std::unique_ptr<Backend>>(opts.error());
    opts->capacity_bytes = capacity_bytes;
    if (!key_prefix.empty()) opts->key_prefix = key_prefix;
    opts->fault_hook = fault_hook_from_env();
    return open_redis_backend(*opts);
  }
  if (uri.rfind("redis-cluster://", 0) == 0) {
    auto opts = parse_redis_cluster_url(uri);
    if (!opts) return Result<std::unique_ptr<Backend>>(opts.error());
    opts->node.capacity_bytes = capacity_bytes;
    if (!key_prefix.empty()) opts->node.key_prefix = key_prefix;
    opts->node.fault_hook = fault_hook_from_env();
    return open_redis_cluster_backend(*opts);
  }
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<Backend>> open_backend(const std::string& uri, std::uint64_t capacity_bytes) {
  if (is_memory(uri)) return make_memory_backend(capacity_bytes);
  if (uri.rfind("disk:", 0) == 0) return open_disk(uri.substr(5), capacity_bytes);
  if (auto redis = open_redis(uri, capacity_bytes, "")) return std::move(*redis);
  return make_error(Errc::invalid_argument,
                    "unknown storage URI (want memory:, disk:PATH, redis://host:port/db or "
                    "redis-cluster://host:port,host:port/): " +
                        uri);
}

Status check_namespace_name(const std::string& ns) {
  if (!valid_namespace_name(ns)) {
    return make_error(Errc::invalid_argument,
                      "namespace name must be 1-63 characters of a-z, 0-9, '_' and '-', starting with a letter "
                      "or a digit: '" + ns + "'");
  }
  return Ok{};
}

Result<std::unique_ptr<Backend>> open_namespace_backend(const std::string& uri, const std::string& ns,
                                                        std::uint64_t capacity_bytes) {
  if (auto s = check_namespace_name(ns); !s) return s.error();
  if (ns == "default") return open_backend(uri, capacity_bytes);
  if (is_memory(uri)) return make_memory_backend(capacity_bytes);
  if (uri.rfind("disk:", 0) == 0) {
    const disk::Layout server_store{uri.substr(5)};
    if (server_store.root.empty()) return make_error(Errc::invalid_argument, "disk backend needs a path");
    for (const auto& dir : {server_store.root, server_store.namespaces()}) {
      if (auto s = disk::make_dir(dir); !s) return s.error();
    }
    return open_disk(server_store.namespace_root(ns), capacity_bytes);
  }
  if (auto redis = open_redis(uri, capacity_bytes, namespace_prefix(ns))) return std::move(*redis);
  return open_backend(uri, capacity_bytes);  // its error for an unknown URI
}

}  // namespace kcache::storage
