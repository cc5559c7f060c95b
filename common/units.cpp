#include "common/units.hpp"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace kcache {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  const std::string_view t = trim(text);
  std::size_t i = 0, dots = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) dots += t[i++] == '.';
  const std::string num(t.substr(0, i));
  std::string unit;
  for (char c : trim(t.substr(i))) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (num.empty() || num.front() == '.' || num.back() == '.' || dots > 1) return std::nullopt;
  if (unit.size() > 1 && unit.back() == 'b') unit.pop_back();  // "GB", "GiB"
  if (unit.size() > 1 && unit.back() == 'i') unit.pop_back();  // "Gi"
  int shift = 0;
  if (unit.empty() || unit == "b") shift = 0;
  else if (unit == "k") shift = 10;
  else if (unit == "m") shift = 20;
  else if (unit == "g") shift = 30;
  else if (unit == "t") shift = 40;
  else if (unit == "p") shift = 50;
  else return std::nullopt;
  if (shift == 0 && dots) return std::nullopt;
  if (shift == 0) {  // whole bytes: exact, no floating point
    std::uint64_t n = 0;
    for (char c : num) {
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (n > (UINT64_MAX - d) / 10) return std::nullopt;
      n = n * 10 + d;
    }
    return n;
  }
  double value = 0;
  try {
    value = std::stod(num);  // out_of_range for a number too long for a double
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const double bytes = std::ldexp(value, shift);
  if (!(bytes >= 0) || bytes >= 18446744073709551616.0) return std::nullopt;  // 2^64
  if (bytes >= 9007199254740992.0) return static_cast<std::uint64_t>(bytes);  // 2^53 up: whole already
  return static_cast<std::uint64_t>(std::llround(bytes));
}

std::optional<double> parse_duration_seconds(std::string_view text, double bare_unit_seconds) {
  if (text.empty()) return std::nullopt;
  double total = 0;
  std::size_t i = 0, parts = 0;
  bool bare = false;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string num(text.substr(start, i - start));
    if (num.empty() || num == "." || std::count(num.begin(), num.end(), '.') > 1 || num.size() > 30) {
      return std::nullopt;
    }
    std::string unit;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) unit += text[i++];
    double scale = 0;
    if (unit.empty()) scale = bare_unit_seconds, bare = true;
    else if (unit == "ms") scale = 0.001;
    else if (unit == "s") scale = 1;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h") scale = 3600;
    else if (unit == "d") scale = 86400;
    else if (unit == "w") scale = 7 * 86400;
    else return std::nullopt;
    total += std::strtod(num.c_str(), nullptr) * scale;
    ++parts;
  }
  if (bare && parts > 1) return std::nullopt;  // "3h12" is ambiguous
  if (!(total >= 0) || total > 100.0 * 365 * 86400) return std::nullopt;
  return total;
}

std::optional<std::uint64_t> parse_duration_ms(std::string_view text) {
  auto s = parse_duration_seconds(text, 0.001);
  if (!s) return std::nullopt;
  return static_cast<std::uint64_t>(std::llround(*s * 1000));
}

}  // namespace kcache
