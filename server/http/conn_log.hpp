// How an HTTP connection names itself in log lines: its number in the
// connection registry and its peer ("ip:port").
#pragma once

#include <cstdint>
#include <string>

namespace kcache::server {

struct ConnLog {
  std::uint64_t conn = 0;
  const std::string& peer;
};

}  // namespace kcache::server
