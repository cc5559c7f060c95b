// kcache::Client: fetch compiled-region bundles from the node tier and the
// kcache server, or compile them exactly once across the cluster.
//
// Contract:
//  - Nothing throws across this API: results are Result<T> values, and an
//    exception thrown by a compile callback is caught, its lease released,
//    and reported as Errc::internal.
//  - Fail-open: a server that is down, slow, wrong or refusing is never an
//    error. The client falls back to compiling locally within the bounds in
//    docs/client.md ("Time bounds"); only a bad key, an invalid bundle handed
//    to put(), or a failing compile callback are errors.
//  - Every bundle returned has been verified (SHA-256 trailer, its own key,
//    and a trusted signature when trusted keys are configured).
//  - Fork safety: a child process never reuses the parent's connections; the
//    connection pool is dropped when getpid() changes.
// Thread safety: all methods may be called from many threads at once.
// Ownership: returned bundles are owned by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/config.hpp"
#include "client/export.hpp"
#include "common/result.hpp"

namespace kcache {

// Where get_or_compile's bundle came from.
enum class Source {
  node,      // the node tier (this host's shared directory)
  server,    // downloaded from the kcache server
  compiled,  // compiled here and published to every configured tier
  local,     // compiled here because the server was unreachable, erring,
             // read-only or disabled: nothing uploaded
};
KCACHE_CLIENT_API const char* source_name(Source s) noexcept;

struct Fetched {
  std::vector<std::uint8_t> bundle;
  Source source = Source::local;
};

// Per-process counters since the client was created.
struct ClientStats {
  std::uint64_t node_hits = 0;
  std::uint64_t server_hits = 0;
  std::uint64_t misses = 0;          // lookups that found nothing usable
  std::uint64_t lease_waits = 0;     // waits on another process's compile
  std::uint64_t lease_busy = 0;      // try_get_or_compile calls that found a lease held elsewhere
  std::uint64_t compiles = 0;        // callbacks run (successful or not)
  std::uint64_t local_compiles = 0;  // of which because the server failed
  std::uint64_t compile_failures = 0;
  double compile_seconds_spent = 0;  // wall time in callbacks
  double compile_seconds_saved = 0;  // manifest compile_seconds of every hit
  std::uint64_t bytes_fetched = 0;   // bundle bytes downloaded
  std::uint64_t bytes_uploaded = 0;
  std::uint64_t uploads = 0;
  std::uint64_t upload_failures = 0;
  std::uint64_t server_errors = 0;  // failed server calls (after retries)
  std::uint64_t refused = 0;        // bundles that failed verification
  std::string breaker;              // "closed", "open" or "half_open"
};

// Compiles the region: returns the bundle bytes (manifest "key" = the key),
// or an Error to abort (the lease is released and the error returned).
using CompileFn = std::function<Result<std::vector<std::uint8_t>>()>;

class KCACHE_CLIENT_API Client {
 public:
  // Errors only for configuration: a bad URL, unreadable TLS, trust or
  // signing files. Nothing touches the network here.
  static Result<std::unique_ptr<Client>> create(ClientConfig config);
  static Result<std::unique_ptr<Client>> from_env();
  ~Client();  // logs stats_line() at info when anything happened
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Node tier, then server (a server hit is published to the node tier).
  // nullopt on a miss, including every server failure and every refused
  // bundle. Error only for a malformed key.
  Result<std::optional<std::vector<std::uint8_t>>> get(std::string_view key);

  // Verifies the bundle (it must be for `key`), signs it when a signing key
  // is configured and it is unsigned, publishes it to the node tier and
  // uploads it. true when every configured tier now holds it; false when the
  // upload failed (logged and counted). Error for a bad key or bundle, and
  // for one this client would refuse on get (not signed by a trusted key,
  // cubins for another GPU arch): then no tier gets it.
  Result<bool> put(std::string_view key, std::span<const std::uint8_t> bundle);

  // The single-flight path (docs/client.md, "get_or_compile"). `explanation`
  // (the key's explanation JSON, optional) is written to the miss log.
  Result<Fetched> get_or_compile(std::string_view key, const CompileFn& compile,
                                 std::string_view explanation = {});

  // get_or_compile without waiting (docs/client.md, "try_get_or_compile"):
  // nullopt when another process holds the key's lease (on the server, or
  // the node lock on a node without one). Nothing is compiled or waited for
  // then; a compile worker takes another region and asks again later. A
  // key tried again and again counts one miss.
  Result<std::optional<Fetched>> try_get_or_compile(std::string_view key, const CompileFn& compile,
                                                    std::string_view explanation = {});

  // get(), saying which tier answered (node or server).
  Result<std::optional<Fetched>> lookup(std::string_view key);

  // Writes a miss-log record (kind "check_failure") for a stored entry the
  // caller found but refused because its own checks failed; `failures` says
  // which, in words. Never fails: an unwritable log is skipped.
  void note_check_failure(std::string_view key, std::string_view explanation,
                          const std::vector<std::string>& failures);

  // Removes `key`'s bundle from the node tier, if there is one: the caller
  // refused it after loading (its own checks failed). Never fails; a bad
  // key or a missing file is nothing to do.
  void drop_node_copy(std::string_view key) const;

  // Adds a rank's cold-start counters (a JSON object: eager_block_calls,
  // regions_switched, background_compile_seconds, background_refusals,
  // background_faults) to the server's (docs/cold-start.md). true when the
  // server took them; false without a server or when it failed (not retried:
  // the counters are for observing, and a repeat would count twice).
  bool report_cold_start(const std::string& json);

  ClientStats stats() const;
  std::string stats_json() const;
  std::string stats_line() const;
  const ClientConfig& config() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcache
