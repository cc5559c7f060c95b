#include "cli/entries.hpp"

#include <algorithm>

#include "keys/cache_key.hpp"

namespace kcache::cli {

using nlohmann::json;

namespace {

constexpr std::size_t k_page = 1000;  // the server's largest page

std::string query_for(const EntryFilter& f, std::size_t limit, const std::string& cursor) {
  std::string q = "/v1/entries?sort=" + f.sort + "&order=" + (f.descending ? "desc" : "asc") +
                  "&limit=" + std::to_string(limit);
  if (!f.label_prefix.empty()) q += "&label_prefix=" + url_encode(f.label_prefix);
  if (!f.target.empty()) q += "&target=" + url_encode(f.target);
  if (!f.mode.empty()) q += "&mode=" + url_encode(f.mode);
  if (!f.toolchain.empty()) q += "&toolchain=" + url_encode(f.toolchain);
  if (!cursor.empty()) q += "&cursor=" + url_encode(cursor);
  return q;
}

}  // namespace

Result<EntryPage> list_entries(Api& api, const EntryFilter& filter, std::size_t max) {
  EntryPage out;
  std::string cursor;
  for (;;) {
    std::size_t want = k_page;
    if (max > 0) want = std::min(k_page, max - out.entries.size());
    auto page = api.call_json("GET", query_for(filter, want, cursor), Role::read);
    if (!page) return page.error();
    const json& arr = (*page)["entries"];
    if (!arr.is_array())
      return make_error(Errc::corrupt, "the entry listing from " + api.url() + " has no entries");
    for (const auto& e : arr) out.entries.push_back(e);
    const json& next = (*page)["next_cursor"];
    if (!next.is_string() || next.get<std::string>().empty()) break;
    if (max > 0 && out.entries.size() >= max) {
      out.truncated = true;
      break;
    }
    cursor = next.get<std::string>();
  }
  return out;
}

Result<std::string> resolve_key(Api& api, const std::string& text) {
  if (keys::is_key_hex(text)) return text;
  bool hex = !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex || text.size() < 6 || text.size() > 64) {
    return usage_error(
        "'" + text +
        "' is not a key: give 64 lowercase hex digits, or a unique prefix of at least "
        "6 (as `kcache ls` shows)");
  }
  auto all = list_entries(api, EntryFilter{});
  if (!all) return all.error();
  std::vector<std::string> found;
  for (const auto& e : all->entries) {
    std::string key = e.value("key", "");
    if (key.rfind(text, 0) == 0) found.push_back(key);
  }
  if (found.empty())
    return make_error(Errc::not_found, "no stored key starts with " + text + " on " + api.url());
  if (found.size() > 1) {
    return usage_error("the prefix " + text + " names " + std::to_string(found.size()) +
                       " stored keys; give more digits");
  }
  return found.front();
}

}  // namespace kcache::cli
