// Helpers for the storage tests: temp directories, a real redis-server on a
// random loopback port (started and killed by the test), keys and payloads.
// Thread safety: test-thread only, except make_key/make_bytes (pure).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/hex.hpp"
#include "common/sha256.hpp"

namespace kcache::storage::testing {

inline std::string make_key(const std::string& seed) { return to_hex(sha256(seed)); }

inline std::vector<std::uint8_t> make_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return out;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kcache-storage-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A free loopback port: bind port 0, read it back, close.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// What a test needs of a Redis, single or Cluster (redis_cluster_util.hpp):
// its storage URL and redis-cli against it.
class RedisCli {
 public:
  virtual ~RedisCli() = default;
  virtual std::string url() const = 0;
  // Runs redis-cli with `args`; returns its stdout.
  virtual std::string cli(const std::string& args) const = 0;
};

// redis-server --port N --save '' --appendonly no, owned by this process.
class RedisServer final : public RedisCli {
 public:
  explicit RedisServer(int port = free_port(), std::string password = "")
      : port_(port), password_(std::move(password)) {
    start();
  }
  ~RedisServer() override { stop(); }

  int port() const { return port_; }
  std::string url() const override { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }


  void start() {
    std::string port = std::to_string(port_);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      std::freopen("/dev/null", "w", stdout);
      std::vector<const char*> argv = {"redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no"};
      if (!password_.empty()) {
        argv.push_back("--requirepass");
        argv.push_back(password_.c_str());
      }
      argv.push_back(nullptr);
      ::execvp("redis-server", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    // Up to 20 s (a loaded machine); a child that exited (the port was
    // taken meanwhile) is said at once rather than waited for.
    for (int i = 0; i < 2000 && !port_accepts(port_); ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        std::fprintf(stderr, "redis-server on port %d exited at start (status %d)\n", port_, status);
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Runs redis-cli against this server; returns its stdout.
  std::string cli(const std::string& args) const override {
    std::string auth = password_.empty() ? "" : " --no-auth-warning -a " + password_;
    std::string cmd = "redis-cli -p " + std::to_string(port_) + auth + " " + args;
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      std::size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }

  pid_t pid() const { return pid_; }

 private:
  int port_;
  std::string password_;
  pid_t pid_ = -1;
};

}  // namespace kcache::storage::testing
