#include "server/http/miss_explain.hpp"

#include "artifact/bundle.hpp"
#include "keys/explanation.hpp"

namespace kcache::server {

namespace {

constexpr std::size_t k_max_value = 160;
constexpr std::size_t k_candidates = 50;

std::string cut(const keys::FieldExplanation& f) {
  if (f.value.empty()) return f.size ? "(" + std::to_string(f.size) + " bytes, hash " + f.hash.substr(0, 12) + ")" : "";
  return f.value.size() > k_max_value ? f.value.substr(0, k_max_value) + "…" : f.value;
}

// The most recently used stored entry (not `key`) whose label starts with `prefix`
// and, when `exact`, equals it.
std::optional<storage::Entry> nearest(storage::Backend& store, const std::string& key, const std::string& prefix,
                                      bool exact) {
  storage::ListQuery q;
  q.label_prefix = prefix;
  q.sort = storage::SortBy::last_access;
  q.descending = true;
  q.limit = k_candidates;
  auto page = store.list(q);
  if (!page) return std::nullopt;
  for (auto& e : page->entries) {
    if (e.key != key && (!exact || e.meta.label == prefix)) return std::move(e);
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json explain_miss(storage::Backend& store, const std::string& key, const std::string& label,
                            const nlohmann::json& explanation) {
  nlohmann::json out = {{"label", label}, {"nearest", nullptr}, {"differing", nullptr}};
  auto missed = explanation.is_object() ? keys::Explanation::from_json(explanation)
                                        : Result<keys::Explanation>(Error{Errc::invalid_argument, ""});
  if (!missed) {
    out["note"] = "the upload carries no key explanation";
    return out;
  }
  auto near = nearest(store, key, label, true);
  if (!near && label.find('/') != std::string::npos) near = nearest(store, key, label.substr(0, label.find('/') + 1), false);
  if (!near) {
    out["note"] = "nothing stored shares its label or region name";
    return out;
  }
  artifact::RangeReader read = [&](std::uint64_t offset, std::uint64_t length) {
    return store.read_range(near->key, offset, length);
  };
  auto summary = artifact::inspect_bundle_ranges(near->size, read);
  out["nearest"] = near->key;
  out["nearest_label"] = near->meta.label;
  const nlohmann::json* ex = summary ? &summary->manifest["explanation"] : nullptr;
  nlohmann::json parsed;
  if (ex && ex->is_string()) {
    parsed = nlohmann::json::parse(ex->get<std::string>(), nullptr, false);
    ex = &parsed;
  }
  auto stored = ex && ex->is_object() ? keys::Explanation::from_json(*ex)
                                      : Result<keys::Explanation>(Error{Errc::invalid_argument, ""});
  if (!stored) {
    out["note"] = "the nearest entry's manifest carries no key explanation";
    return out;
  }
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& d : keys::diff(*missed, *stored)) {
    fields.push_back({{"field", d.field}, {"missed", cut(d.left)}, {"stored", cut(d.right)}});
  }
  out["differing"] = std::move(fields);
  return out;
}

}  // namespace kcache::server
