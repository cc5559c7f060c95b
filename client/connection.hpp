// Connection: one TCP (optionally TLS) connection with poll(2) deadlines.
//
// Internal to client/. Plain sockets are non-blocking and written with
// MSG_NOSIGNAL; TLS runs OpenSSL over memory BIOs and moves the ciphertext
// itself, so neither ever raises SIGPIPE in a training process.
// Ownership: owns the file descriptor and the SSL object. Destroying a
// Connection in a process other than the one that opened it (after fork)
// closes the descriptor and frees the SSL object without sending anything.
// Thread safety: one thread at a time.
#pragma once

#include <sys/types.h>

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/result.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace kcache::client {

using SteadyTime = std::chrono::steady_clock::time_point;

class Connection {
 public:
  // Resolves host (getaddrinfo: numeric hosts never block; names use the
  // system resolver's own timeouts), connects to the first address that
  // answers, and runs the TLS handshake when ctx is set (verifying the
  // server's certificate and host name).
  static Result<std::unique_ptr<Connection>> open(const std::string& host, const std::string& port,
                                                  ssl_ctx_st* ctx, SteadyTime deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Like recv/send: at least one byte, or an error (asio's eof, timed_out,
  // or a system error). Both honour `deadline`.
  std::size_t read_some(void* data, std::size_t size, SteadyTime deadline,
                        boost::system::error_code& ec);
  std::size_t write_some(const void* data, std::size_t size, SteadyTime deadline,
                         boost::system::error_code& ec);

  // An idle keep-alive connection is usable when the peer has neither closed
  // it nor sent anything unasked.
  bool idle_usable() const;
  pid_t owner_pid() const { return pid_; }

 private:
  Connection(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  bool wait(short events, SteadyTime deadline, boost::system::error_code& ec) const;
  bool flush_tls(SteadyTime deadline, boost::system::error_code& ec);
  bool fill_tls(SteadyTime deadline, boost::system::error_code& ec);
  std::size_t raw_read(void* data, std::size_t size, SteadyTime deadline,
                       boost::system::error_code& ec);
  bool raw_write_all(const void* data, std::size_t size, SteadyTime deadline,
                     boost::system::error_code& ec);
  Status handshake(const std::string& host, SteadyTime deadline);

  int fd_ = -1;
  pid_t pid_ = 0;
  ssl_st* ssl_ = nullptr;
};

}  // namespace kcache::client
