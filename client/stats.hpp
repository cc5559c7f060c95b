// StatsCounters: the client's per-process counters, lock-free so that any
// thread (and a forked child) can bump them.
// Thread safety: all members are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "client/client.hpp"

namespace kcache::client {

struct StatsCounters {
  std::atomic<std::uint64_t> node_hits{0}, server_hits{0}, misses{0}, lease_waits{0}, lease_busy{0},
      compiles{0},
      local_compiles{0}, compile_failures{0}, compile_us_spent{0}, compile_us_saved{0},
      bytes_fetched{0}, bytes_uploaded{0}, uploads{0}, upload_failures{0}, server_errors{0},
      refused{0};

  ClientStats snapshot(std::string breaker) const;
};

std::string stats_json(const ClientStats& s);
std::string stats_line(const ClientStats& s);

}  // namespace kcache::client
