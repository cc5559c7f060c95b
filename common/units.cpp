#include "common/units.hpp"

#include <cctype>
#include <cmath>
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

}  // namespace kcache
