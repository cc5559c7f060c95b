#include "keys/explanation.hpp"

namespace kcache::keys {

namespace {

bool is_inline_text(std::string_view v) {
  if (v.size() > k_max_inline_value) return false;
  for (unsigned char c : v) {
    if (c < 0x20 && c != '\n' && c != '\t') return false;
    if (c >= 0x7f) return false;  // keep the JSON pure ASCII
  }
  return true;
}

Result<std::string> get_string(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) {
    return make_error(Errc::invalid_argument,
                      std::string("explanation: missing string member '") + name + "'");
  }
  return it->get<std::string>();
}

}  // namespace

nlohmann::json Explanation::to_json() const {
  nlohmann::json fj = nlohmann::json::object();
  for (const auto& [name, f] : fields) {
    nlohmann::json e = {{"hash", f.hash}, {"size", f.size}};
    if (!f.value.empty()) e["value"] = f.value;
    if (!f.detail.empty()) e["detail"] = f.detail;
    fj[name] = std::move(e);
  }
  return {{"format", "kcache-explanation-v1"}, {"key", key}, {"label", label}, {"fields", fj}};
}

Result<Explanation> Explanation::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return make_error(Errc::invalid_argument, "explanation: not an object");
  Explanation out;
  auto key = get_string(j, "key");
  if (!key) return key.error();
  if (!is_key_hex(*key)) return make_error(Errc::invalid_argument, "explanation: bad key");
  out.key = *key;
  auto label = get_string(j, "label");
  if (!label) return label.error();
  out.label = *label;
  auto fit = j.find("fields");
  if (fit == j.end() || !fit->is_object()) {
    return make_error(Errc::invalid_argument, "explanation: missing 'fields' object");
  }
  for (const auto& [name, e] : fit->items()) {
    if (!e.is_object()) return make_error(Errc::invalid_argument, "explanation: bad field " + name);
    FieldExplanation f;
    auto hash = get_string(e, "hash");
    if (!hash) return hash.error();
    f.hash = *hash;
    auto size = e.find("size");
    if (size == e.end() || !size->is_number_unsigned()) {
      return make_error(Errc::invalid_argument, "explanation: bad size of " + name);
    }
    f.size = size->get<std::uint64_t>();
    if (auto v = e.find("value"); v != e.end() && v->is_string()) f.value = v->get<std::string>();
    if (auto d = e.find("detail"); d != e.end() && d->is_string()) f.detail = d->get<std::string>();
    out.fields.emplace(name, std::move(f));
  }
  return out;
}

Result<Explanation> explain(const KeyFields& fields, const std::string& label,
                            const std::map<std::string, std::string>& details) {
  auto key = compute_key(fields);
  if (!key) return key.error();
  if (auto st = validate_label(label); !st) return st.error();
  Explanation out;
  out.key = key->hex();
  out.label = label;
  for (Field f : k_all_fields) {
    const std::string& v = fields.get(f);
    FieldExplanation e;
    e.hash = field_hash_hex(f, v);
    e.size = v.size();
    if (is_inline_text(v)) e.value = v;
    if (auto d = details.find(field_name(f)); d != details.end()) e.detail = d->second;
    out.fields.emplace(field_name(f), std::move(e));
  }
  return out;
}

std::vector<FieldDiff> diff(const Explanation& left, const Explanation& right) {
  std::vector<FieldDiff> out;
  auto differs = [&](const std::string& name) {
    auto l = left.fields.find(name);
    auto r = right.fields.find(name);
    if (l == left.fields.end() && r == right.fields.end()) return;
    FieldDiff d{name, {}, {}};
    if (l != left.fields.end()) d.left = l->second;
    if (r != right.fields.end()) d.right = r->second;
    if (l == left.fields.end() || r == right.fields.end() || l->second.hash != r->second.hash) {
      out.push_back(std::move(d));
    }
  };
  for (Field f : k_all_fields) differs(field_name(f));
  // Fields unknown to this build (a newer schema) still count.
  for (const auto& [name, _] : left.fields) {
    bool known = false;
    for (Field f : k_all_fields) known = known || name == field_name(f);
    if (!known) differs(name);
  }
  for (const auto& [name, _] : right.fields) {
    bool known = false;
    for (Field f : k_all_fields) known = known || name == field_name(f);
    if (!known && !left.fields.contains(name)) differs(name);
  }
  return out;
}

}  // namespace kcache::keys
