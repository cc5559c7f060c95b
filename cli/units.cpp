#include "cli/units.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/units.hpp"

namespace kcache::cli {

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  if (!(seconds > 0)) return "0s";
  char buf[48];
  if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%dms", static_cast<int>(std::lround(seconds * 1000)));
    return buf;
  }
  if (seconds < 10) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    return buf;
  }
  auto s = static_cast<std::int64_t>(std::llround(seconds));
  std::int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, r = s % 60;
  if (d > 0)
    std::snprintf(buf, sizeof buf, "%lldd%lldh", static_cast<long long>(d),
                  static_cast<long long>(h));
  else if (h > 0)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(h),
                  static_cast<long long>(m));
  else if (m > 0)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(m),
                  static_cast<long long>(r));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(r));
  return buf;
}

std::string format_ago(std::int64_t unix_ms, std::int64_t now_ms) {
  if (unix_ms <= 0) return "never";
  if (now_ms - unix_ms < 1000) return "just now";
  return format_duration(static_cast<double>(now_ms - unix_ms) / 1000) + " ago";
}

std::string format_utc(std::int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string format_percent(double ratio) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", ratio * 100);
  return buf;
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::uint64_t> parse_size(const std::string& text) { return parse_byte_size(text); }

std::optional<double> parse_duration(const std::string& text) { return parse_duration_seconds(text, 1.0); }

std::string one_line(const std::string& text, std::size_t width) {
  std::string out;
  std::size_t shown = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (shown + 1 >= width && i + 1 < text.size()) return out + "…";
    if (text[i] == '\n')
      out += "⏎";
    else if (text[i] == '\t')
      out += ' ';
    else
      out += text[i];
    ++shown;
  }
  return out;
}

}  // namespace kcache::cli
