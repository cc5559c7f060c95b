// Server: kcache-server's process-wide objects and their lifetime — the
// io_context and its I/O threads, the blocking pool, storage, leases,
// waiters, metrics, the listener, the lease sweeper and the signal handler.
//
// run() binds, prints "listening on HOST:PORT" on stdout, serves until
// SIGTERM/SIGINT (or stop()), then drains: stops accepting, closes idle
// connections, wakes waiting GETs, gives in-flight requests up to
// --drain-timeout-ms, and returns.
// Thread safety: construct and run() on one thread; stop() from any thread.
#pragma once

#include <memory>
#include <string>

#include "server/config.hpp"
#include "storage/backend.hpp"

namespace kcache::server {

class Server {
 public:
  // Throws ConfigError when the address cannot be bound or is refused.
  Server(ServerConfig config, std::unique_ptr<storage::Backend> backend);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Blocks until drained. Returns the process exit code (0).
  int run();
  // Begins the drain, as SIGTERM does.
  void stop();
  // The bound port (after construction).
  std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcache::server
