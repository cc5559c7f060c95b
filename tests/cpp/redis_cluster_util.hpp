// A real Redis Cluster for tests: three masters and three replicas, each a
// redis-server child on a random loopback port with its cluster config in a
// temp directory, joined by `redis-cli --cluster create --cluster-replicas 1`
// and waited on until every node's CLUSTER INFO says cluster_state:ok.
// Killed (SIGKILL) and removed when the object dies; children die with the
// test process (PR_SET_PDEATHSIG).
// cli() speaks to the cluster as a whole: `redis-cli -c` (follows MOVED),
// except FLUSHALL and --scan, which go to every master.
// Thread safety: test-thread only.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "storage_test_util.hpp"

namespace kcache::storage::testing {

inline std::string run_shell(const std::string& cmd, int* status = nullptr) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = ::pclose(p);
    if (status != nullptr) *status = st;
  }
  return out;
}

class RedisTestCluster final : public RedisCli {
 public:
  // Node timeout: how long a master must be unreachable before its replica
  // is promoted. Short, so a failover test takes seconds.
  // With a password, every node requires it (requirepass, and masterauth so
  // replicas can sync) and url() carries it.
  explicit RedisTestCluster(int node_timeout_ms = 3000, std::string password = "")
      : node_timeout_ms_(node_timeout_ms), password_(std::move(password)) {
    while (ports_.size() < 6) {
      int port = free_port();
      if (std::find(ports_.begin(), ports_.end(), port) != ports_.end()) continue;
      // A port another process took after free_port() makes the child exit: pick another.
      if (spawn(port)) ports_.push_back(port);
    }
    std::string create = redis_cli() + " --cluster create";
    for (int port : ports_) create += " 127.0.0.1:" + std::to_string(port);
    int status = -1;
    std::string out = run_shell(create + " --cluster-replicas 1 --cluster-yes 2>&1", &status);
    if (status != 0) throw std::runtime_error("redis-cli --cluster create failed: " + out);
    if (!wait_ok(std::chrono::seconds(30))) throw std::runtime_error("cluster never reached cluster_state:ok");
  }
  ~RedisTestCluster() override {
    for (auto& [port, pid] : pids_) stop(pid);
  }
  RedisTestCluster(const RedisTestCluster&) = delete;
  RedisTestCluster& operator=(const RedisTestCluster&) = delete;

  std::string url() const override {
    std::string u = "redis-cluster://" + (password_.empty() ? "" : ":" + password_ + "@");
    for (std::size_t i = 0; i < ports_.size(); ++i) {
      u += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(ports_[i]);
    }
    return u + "/";
  }

  std::string cli(const std::string& args) const override {
    if (args == "FLUSHALL" || args.rfind("--scan", 0) == 0) {
      std::string out;
      for (int port : masters()) out += node_cli(port, args);
      return out;
    }
    return run_shell(redis_cli() + " -c -p " + std::to_string(live_port()) + " " + args);
  }

  // redis-cli against one node, without following redirects.
  std::string node_cli(int port, const std::string& args) const {
    return run_shell(redis_cli() + " -p " + std::to_string(port) + " " + args);
  }

  const std::vector<int>& ports() const { return ports_; }

  // Ports of the live nodes whose ROLE is master.
  std::vector<int> masters() const {
    std::vector<int> out;
    for (int port : ports_) {
      if (pids_.count(port) != 0 && node_cli(port, "ROLE").rfind("master", 0) == 0) out.push_back(port);
    }
    return out;
  }

  std::string node_id(int port) const { return trim(node_cli(port, "CLUSTER MYID")); }

  // The master port serving `slot`, as the node at `ask_port` sees it; -1 if none.
  int owner_of(int slot, int ask_port) const {
    std::istringstream in(node_cli(ask_port, "CLUSTER NODES"));
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string id, addr, flags, master, ping, pong, epoch, link, range;
      f >> id >> addr >> flags >> master >> ping >> pong >> epoch >> link;
      if (flags.find("master") == std::string::npos || flags.find("fail") != std::string::npos) continue;
      while (f >> range) {
        if (range[0] == '[') continue;  // a migrating / importing marker
        auto dash = range.find('-');
        int lo = std::stoi(range.substr(0, dash));
        int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
        auto colon = addr.find(':');  // 127.0.0.1:PORT@BUSPORT
        if (slot >= lo && slot <= hi) return std::stoi(addr.substr(colon + 1, addr.find('@') - colon - 1));
      }
    }
    return -1;
  }

  // The port of a live replica of the master at `master_port`; -1 if none.
  int replica_of(int master_port) const {
    for (int port : ports_) {
      if (pids_.count(port) == 0 || port == master_port) continue;
      std::istringstream in(node_cli(port, "ROLE"));
      std::string role, host;
      int of = 0;
      in >> role >> host >> of;  // slave 127.0.0.1 <master port> connected <offset>
      if (role == "slave" && of == master_port) return port;
    }
    return -1;
  }

  // Runs `args` on the replica at `port` after READONLY, on one connection
  // (a replica answers MOVED to a read without it).
  std::string replica_read(int port, const std::string& args) const {
    return run_shell("printf 'READONLY\\n%s\\n' \"" + args + "\" | " + redis_cli() + " -p " + std::to_string(port));
  }

  // SIGSTOP / SIGCONT one node: a hung master, not a dead one.
  void pause_node(int port) const { ::kill(pids_.at(port), SIGSTOP); }
  void resume_node(int port) const { ::kill(pids_.at(port), SIGCONT); }

  // SIGKILL one node (kill -9).
  void kill_node(int port) {
    auto it = pids_.find(port);
    if (it == pids_.end()) return;
    stop(it->second);
    pids_.erase(it);
  }

  // Polls the master's INFO replication until every replica has acknowledged
  // the master's whole replication stream (so a failover loses nothing).
  bool wait_replicated(int master_port, std::chrono::milliseconds limit) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      std::istringstream in(node_cli(master_port, "INFO replication"));
      long long master_offset = -1;
      std::vector<long long> replica_offsets;  // INFO lists the replicas before master_repl_offset
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("master_repl_offset:", 0) == 0) master_offset = std::stoll(line.substr(19));
        if (line.rfind("slave", 0) == 0 && line.find("offset=") != std::string::npos) {
          replica_offsets.push_back(std::stoll(line.substr(line.find("offset=") + 7)));
        }
      }
      std::size_t replicas = replica_offsets.size();
      auto caught_up = static_cast<std::size_t>(std::count_if(replica_offsets.begin(), replica_offsets.end(),
                                                              [&](long long o) { return o >= master_offset; }));
      if (master_offset >= 0 && replicas > 0 && caught_up == replicas) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Polls until every live master reports a replica in state=online (the
  // initial sync after `--cluster create` done): WAIT counts only those.
  bool wait_replicas_online(std::chrono::milliseconds limit) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      auto ms = masters();
      bool all = !ms.empty();
      for (int m : ms) {
        if (node_cli(m, "INFO replication").find("state=online") == std::string::npos) all = false;
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // After kill_node(dead): polls until every live node marks it failed and
  // serves all slots again (its replica promoted).
  bool wait_failed_over(int dead, std::chrono::milliseconds limit) const {
    const std::string addr = "127.0.0.1:" + std::to_string(dead) + "@";
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      bool all = true;
      for (const auto& [port, pid] : pids_) {
        std::istringstream in(node_cli(port, "CLUSTER NODES"));
        bool marked = false;
        for (std::string line; std::getline(in, line);) {
          if (line.find(addr) != std::string::npos && line.find("fail") != std::string::npos &&
              line.find("fail?") == std::string::npos) {
            marked = true;
          }
        }
        if (!marked) all = false;
      }
      if (all) {
        auto left = until - std::chrono::steady_clock::now();
        return wait_ok(std::chrono::duration_cast<std::chrono::milliseconds>(left));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Polls every live node's CLUSTER INFO until each says cluster_state:ok
  // with all 16384 slots served by a reachable master.
  bool wait_ok(std::chrono::milliseconds limit) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      bool all = true;
      for (const auto& [port, pid] : pids_) {
        std::string info = node_cli(port, "CLUSTER INFO");
        if (info.find("cluster_state:ok") == std::string::npos ||
            info.find("cluster_slots_ok:16384") == std::string::npos) {
          all = false;
          break;
        }
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  static std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
  }

  std::string redis_cli() const {
    return password_.empty() ? "redis-cli" : "redis-cli --no-auth-warning -a " + password_;
  }

  int live_port() const {
    for (int port : ports_) {
      if (pids_.count(port) != 0) return port;
    }
    return ports_.front();
  }

  // Starts a node; true once it accepts, false if it exited first.
  bool spawn(int port) {
    std::string dir = dir_.path() + "/" + std::to_string(port);
    std::filesystem::create_directories(dir);
    std::string p = std::to_string(port), timeout = std::to_string(node_timeout_ms_);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      std::freopen("/dev/null", "w", stdout);
      std::vector<const char*> argv = {"redis-server", "--port", p.c_str(), "--bind", "127.0.0.1",
                                       "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                       "--cluster-node-timeout", timeout.c_str(), "--dir", dir.c_str(),
                                       "--save", "", "--appendonly", "no",
                                       // replicas sync at once, not after the default 5 s wait for company
                                       "--repl-diskless-sync-delay", "0"};
      if (!password_.empty()) {
        for (const char* a : {"--requirepass", password_.c_str(), "--masterauth", password_.c_str()}) argv.push_back(a);
      }
      argv.push_back(nullptr);
      ::execvp("redis-server", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
      // Ours, not another test's node that took the port first (ctest -j
      // runs several clusters at once); and not port_accepts(), which can
      // connect to itself on a port in the ephemeral range.
      std::string info = run_shell(redis_cli() + " -p " + std::to_string(port) + " INFO server 2>&1");
      if (info.find("process_id:" + std::to_string(pid) + "\r") != std::string::npos) {
        pids_[port] = pid;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop(pid);
    return false;
  }

  static void stop(pid_t pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }

  TempDir dir_;
  int node_timeout_ms_;
  std::string password_;  // tests use plain passwords: no shell quoting needed
  std::vector<int> ports_;
  std::map<int, pid_t> pids_;  // live nodes: port -> pid
};

}  // namespace kcache::storage::testing
