#include "cli/table.hpp"

#include <algorithm>

namespace kcache::cli {

std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;  // count lead bytes only
  }
  return n;
}

Table::Table(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {}

void Table::add(std::vector<std::string> row) {
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& os, const std::string& indent) const {
  std::size_t cols = headers_.size();
  for (const auto& r : rows_) cols = std::max(cols, r.size());
  std::vector<std::size_t> width(cols, 0);
  auto measure = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
  };
  measure(headers_);
  for (const auto& r : rows_) measure(r);

  auto line = [&](const std::vector<std::string>& r) {
    std::string out = indent;
    for (std::size_t i = 0; i < cols; ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      const std::size_t pad = width[i] - display_width(cell);
      const bool right = i < align_.size() && align_[i] == Align::right;
      if (i > 0) out += "  ";
      if (right)
        out += std::string(pad, ' ') + cell;
      else
        out += cell + (i + 1 < cols ? std::string(pad, ' ') : "");
    }
    while (out.size() > indent.size() && out.back() == ' ') out.pop_back();
    os << out << '\n';
  };
  if (!headers_.empty()) line(headers_);
  for (const auto& r : rows_) line(r);
}

void print_fields(std::ostream& os, const std::vector<std::pair<std::string, std::string>>& fields,
                  const std::string& indent) {
  Table t({});
  for (const auto& [name, value] : fields) t.add({name, value});
  t.print(os, indent);
}

}  // namespace kcache::cli
