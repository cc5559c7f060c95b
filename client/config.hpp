// ClientConfig: everything a kcache::Client needs, set in code or read from
// the KCACHE_* environment (docs/client.md lists every variable).
//
// Contract:
//  - from_env() never throws. A malformed value (a size that is not a size,
//    an unreadable token file) is invalid_argument / io_error: configuration
//    errors are reported, never silently ignored, because ignoring
//    KCACHE_TRUSTED_KEYS would silently turn trust off.
//  - Secrets (the token, the signing key) are held here but never logged;
//    describe() prints "<set>" in their place.
// Thread safety: plain value type.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "client/export.hpp"
#include "common/result.hpp"

namespace kcache {

struct KCACHE_CLIENT_API ClientConfig {
  // Server base URL, http://host[:port][/prefix] or https://…; empty means
  // node tier only (no server). KCACHE_URL.
  std::string url;
  // Bearer token sent as "Authorization: Bearer …". KCACHE_TOKEN; a value
  // starting with '@' names a file holding the token (KCACHE_TOKEN=@/run/t).
  std::string token;
  // The namespace this job's keys live in (docs/namespaces.md): sent as
  // X-Kcache-Namespace; the node tier keeps it apart under
  // <local_dir>/namespaces/<ns>. Empty: the token's only namespace, or
  // "default". KCACHE_NAMESPACE; 1-63 characters of [a-z0-9_-].
  std::string ns;
  // TLS: CA bundle that signs the server's certificate (default: the system
  // store), and a client certificate and key for mTLS. KCACHE_CA_FILE,
  // KCACHE_CLIENT_CERT, KCACHE_CLIENT_KEY (PEM files).
  std::string ca_file;
  std::string client_cert;
  std::string client_key;

  // The node tier: a directory shared by every process on the host.
  // KCACHE_LOCAL_DIR; empty means ~/.cache/kcache; "none" disables the tier.
  std::string local_dir;
  bool node_tier = true;
  // Byte budget of the node tier, trimmed least recently used first to 90%
  // of it after each publish. KCACHE_LOCAL_MAX_BYTES (K/M/G/T suffixes);
  // 0 = unlimited. Default 10 GiB.
  std::uint64_t local_max_bytes = 10ull << 30;

  // The default torch.compile mode (carried for the compile layer) and the
  // target override (KCACHE_MODE, KCACHE_TARGET). The client checks the cubins
  // a fetched bundle lists against `target`, or, when it is empty, against
  // the CUDA driver's device 0 (client/cuda_target.hpp).
  std::string mode;
  std::string target;

  // Fetch only: never take leases nor upload. KCACHE_READ_ONLY=1.
  bool read_only = false;
  // Cache nothing: get_or_compile just runs the callback. KCACHE_DISABLE=1.
  bool disabled = false;

  // Trusted Ed25519 public keys: each entry is PEM text or a path to a PEM
  // file. When non-empty, every bundle must carry a signature by one of them.
  // KCACHE_TRUSTED_KEYS: paths separated by ':' or ','.
  std::vector<std::string> trusted_keys;
  // Ed25519 private key (PEM text or a path): uploads and node-tier
  // publishes of freshly compiled bundles are signed with it.
  // KCACHE_SIGNING_KEY.
  std::string signing_key;

  // ---- Time bounds (docs/client.md, "Time bounds"). ----
  // TCP connect plus TLS handshake. KCACHE_CONNECT_TIMEOUT_MS.
  int connect_timeout_ms = 2000;
  // One request up to its response headers; bodies get this plus
  // size / min_transfer_rate more. KCACHE_REQUEST_TIMEOUT_MS.
  int request_timeout_ms = 5000;
  std::uint64_t min_transfer_rate = 1ull << 20;  // bytes per second
  // Extra attempts for idempotent calls (GET, HEAD, PUT, DELETE lease) after a
  // connection failure or a 502/503/504; timeouts are not retried.
  int retries = 2;
  int retry_base_ms = 50;  // backoff: base * 2^attempt, jittered ×[0.5, 1.5)
  // Circuit breaker: after this many consecutive transport failures the
  // server is skipped for breaker_cooldown_ms, then probed by one request.
  int breaker_threshold = 3;
  int breaker_cooldown_ms = 30000;
  // The longest get_or_compile waits for another process's compile (a server
  // lease held by someone else, or the node lock held by a sibling process)
  // before compiling itself. KCACHE_WAIT_BUDGET_MS.
  int wait_budget_ms = 300000;
  // One long-poll GET ?wait_ms is at most this long.
  int long_poll_ms = 20000;

  // Shown as the lease holder (X-Kcache-Client); default "host pid".
  std::string client_name;
  // JSON-lines log of misses with their key explanation; empty means
  // <local_dir>/misses.jsonl when the node tier is on. KCACHE_MISS_LOG
  // ("none" disables).
  std::string miss_log;
  // stderr log level: debug, info, warn, error, off. KCACHE_CLIENT_LOG_LEVEL.
  // The stats line at exit is info.
  std::string log_level = "info";

  // Reads the environment through `getenv` (tests pass a fake).
  static Result<ClientConfig> from_env();
  static Result<ClientConfig> from_env(const std::function<const char*(const char*)>& getenv);

  // One line for logs, secrets replaced by "<set>".
  std::string describe() const;
};

// kcache::parse_byte_size (common/units.hpp) as a Result: "10G", "512M",
// "1.5GiB", "4096" → bytes; the server and the CLI accept the same spellings.
KCACHE_CLIENT_API Result<std::uint64_t> parse_size(const std::string& text);

// Errc::invalid_argument unless `ns` is a namespace name (1-63 characters
// of [a-z0-9_-], the first a letter or digit).
KCACHE_CLIENT_API Status check_namespace(const std::string& ns);

}  // namespace kcache
