// Table: columns aligned for people (the default output of every command).
//
// Widths count UTF-8 code points, so "…" and "⏎" take one column. Columns
// are separated by two spaces; numeric columns are right-aligned; no line
// ends in spaces.
// Thread safety: value type.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace kcache::cli {

enum class Align { left, right };

class Table {
 public:
  // An empty header list prints no header line (key/value blocks).
  explicit Table(std::vector<std::string> headers, std::vector<Align> align = {});

  void add(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& os, const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// A two-column "name  value" block.
void print_fields(std::ostream& os, const std::vector<std::pair<std::string, std::string>>& fields,
                  const std::string& indent = "");

std::size_t display_width(const std::string& s);

}  // namespace kcache::cli
