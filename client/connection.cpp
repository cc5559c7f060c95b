#include "client/connection.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <boost/asio/error.hpp>

namespace kcache::client {

namespace {

namespace aerr = boost::asio::error;
using boost::system::error_code;

int remaining_ms(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<long long>(left.count(), 1 << 30));
}

error_code sys_error(int err) {
  return error_code(err, boost::system::system_category());
}

std::string ssl_error_text() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "TLS failure";
  std::array<char, 256> buf{};
  ERR_error_string_n(e, buf.data(), buf.size());
  return buf.data();
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const std::string& host,
                                                     const std::string& port, ssl_ctx_st* ctx,
                                                     SteadyTime deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0)
    return make_error(Errc::unavailable, "cannot resolve " + host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    std::unique_ptr<Connection> conn(new Connection(fd, ::getpid()));
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = std::strerror(errno);
        continue;
      }
      error_code ec;
      if (!conn->wait(POLLOUT, deadline, ec)) {
        if (ec == aerr::timed_out)
          return make_error(Errc::timeout, "connect to " + host + ":" + port + " timed out");
        last = ec.message();
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = std::strerror(err);
        continue;
      }
    }
    if (ctx != nullptr) {
      conn->ssl_ = SSL_new(ctx);
      if (conn->ssl_ == nullptr) return make_error(Errc::internal, "SSL_new: " + ssl_error_text());
      auto st = conn->handshake(host, deadline);
      if (!st.ok()) return st.error();
    }
    return conn;
  }
  return make_error(Errc::unavailable, "cannot connect to " + host + ":" + port + ": " + last);
}

Status Connection::handshake(const std::string& host, SteadyTime deadline) {
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (in == nullptr || out == nullptr) {
    BIO_free(in);
    BIO_free(out);
    return make_error(Errc::internal, "BIO_new failed");
  }
  SSL_set_bio(ssl_, in, out);  // ssl_ owns both
  SSL_set_connect_state(ssl_);
  in6_addr a6{};
  in_addr a4{};
  bool is_ip =
      ::inet_pton(AF_INET, host.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &a6) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, host.c_str());
    SSL_set1_host(ssl_, host.c_str());
  }
  for (;;) {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl_);
    error_code ec;
    if (!flush_tls(deadline, ec)) {
      return make_error(ec == aerr::timed_out ? Errc::timeout : Errc::unavailable,
                        "TLS handshake with " + host + ": " + ec.message());
    }
    if (r == 1) return Ok{};
    int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ) {
      if (!fill_tls(deadline, ec)) {
        return make_error(ec == aerr::timed_out ? Errc::timeout : Errc::unavailable,
                          "TLS handshake with " + host + ": " + ec.message());
      }
      continue;
    }
    if (err == SSL_ERROR_WANT_WRITE) continue;
    long verify = SSL_get_verify_result(ssl_);
    std::string why = ssl_error_text();
    if (verify != X509_V_OK) why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    return make_error(Errc::unavailable, "TLS handshake with " + host + " failed: " + why);
  }
}

Connection::~Connection() {
  // After fork the SSL object still describes the parent's session: free it
  // without SSL_shutdown (which would write close_notify on the shared socket).
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

bool Connection::wait(short events, SteadyTime deadline, error_code& ec) const {
  for (;;) {
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      ec = aerr::timed_out;
      return false;
    }
    if (errno != EINTR) {
      ec = sys_error(errno);
      return false;
    }
  }
}

std::size_t Connection::raw_read(void* data, std::size_t size, SteadyTime deadline,
                                 error_code& ec) {
  for (;;) {
    ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) {
      ec = aerr::eof;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = sys_error(errno);
      return 0;
    }
    if (!wait(POLLIN, deadline, ec)) return 0;
  }
}

bool Connection::raw_write_all(const void* data, std::size_t size, SteadyTime deadline,
                               error_code& ec) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = sys_error(errno);
      return false;
    }
    if (!wait(POLLOUT, deadline, ec)) return false;
  }
  return true;
}

bool Connection::flush_tls(SteadyTime deadline, error_code& ec) {
  BIO* out = SSL_get_wbio(ssl_);
  std::array<char, 16384> buf;
  while (BIO_ctrl_pending(out) > 0) {
    int n = BIO_read(out, buf.data(), static_cast<int>(buf.size()));
    if (n <= 0) break;
    if (!raw_write_all(buf.data(), static_cast<std::size_t>(n), deadline, ec)) return false;
  }
  return true;
}

bool Connection::fill_tls(SteadyTime deadline, error_code& ec) {
  std::array<char, 16384> buf;
  std::size_t n = raw_read(buf.data(), buf.size(), deadline, ec);
  if (n == 0) return false;
  BIO_write(SSL_get_rbio(ssl_), buf.data(), static_cast<int>(n));
  return true;
}

std::size_t Connection::read_some(void* data, std::size_t size, SteadyTime deadline,
                                  error_code& ec) {
  if (ssl_ == nullptr) return raw_read(data, size, deadline, ec);
  for (;;) {
    ERR_clear_error();
    std::size_t n = 0;
    int r = SSL_read_ex(ssl_, data, size, &n);
    if (!flush_tls(deadline, ec)) return 0;
    if (r == 1) return n;
    int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ) {
      if (!fill_tls(deadline, ec)) return 0;
      continue;
    }
    if (err == SSL_ERROR_WANT_WRITE) continue;
    if (err == SSL_ERROR_ZERO_RETURN) {
      ec = aerr::eof;
      return 0;
    }
    ERR_clear_error();
    ec = aerr::connection_reset;
    return 0;
  }
}

std::size_t Connection::write_some(const void* data, std::size_t size, SteadyTime deadline,
                                   error_code& ec) {
  if (ssl_ == nullptr) {
    if (!raw_write_all(data, size, deadline, ec)) return 0;
    return size;
  }
  ERR_clear_error();
  std::size_t n = 0;
  // The write BIO is memory: SSL_write_ex takes everything, flush_tls sends it.
  int r = SSL_write_ex(ssl_, data, size, &n);
  if (r != 1) {
    ERR_clear_error();
    ec = aerr::connection_reset;
    return 0;
  }
  if (!flush_tls(deadline, ec)) return 0;
  return n;
}

bool Connection::idle_usable() const {
  pollfd p{fd_, POLLIN, 0};
  int rc = ::poll(&p, 1, 0);
  return rc == 0;  // readable (EOF or stray bytes), error or hang-up: drop it
}

}  // namespace kcache::client
