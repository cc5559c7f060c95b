#include "client/log.hpp"

#include <unistd.h>

#include <atomic>
#include <string>

namespace kcache::client {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
}

bool set_log_level(std::string_view name) {
  static constexpr std::string_view k_names[] = {"debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 5; ++i) {
    if (name == k_names[i]) {
      g_level.store(i);
      return true;
    }
  }
  if (name == "warning") return set_log_level("warn");
  return false;
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load();
}

void log(LogLevel level, std::string_view text) {
  if (!log_enabled(level) || level == LogLevel::off) return;
  static constexpr const char* k_tags[] = {"debug", "info", "warn", "error"};
  std::string line = "kcache: ";
  line += k_tags[static_cast<int>(level)];
  line += ": ";
  line += text;
  line += '\n';
  // One write per line; a failed log write is not worth reporting.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace kcache::client
