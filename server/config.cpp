#include "server/config.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "common/units.hpp"

namespace kcache::server {

namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::uint64_t to_u64(const std::string& name, const std::string& v, std::uint64_t max) {
  std::uint64_t out = 0;
  if (v.empty() || v.size() > 19) throw ConfigError("--" + name + ": not a number: '" + v + "'");
  for (char c : v) {
    if (c < '0' || c > '9') throw ConfigError("--" + name + ": not a number: '" + v + "'");
    out = out * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (out > max) throw ConfigError("--" + name + ": out of range: " + v);
  return out;
}

std::uint64_t to_size(const std::string& name, const std::string& v) {
  auto s = parse_size(v);
  if (!s) throw ConfigError("--" + name + ": not a size (want e.g. 20G, 500M, 4096): '" + v + "'");
  return *s;
}

// A duration (common/units.hpp): "30000", "30s", "5m"; bare numbers are ms.
std::uint64_t to_ms(const std::string& name, const std::string& v, std::uint64_t max) {
  auto ms = parse_duration_ms(v);
  if (!ms) throw ConfigError("--" + name + ": not a duration (want e.g. 30000, 30s, 5m): '" + v + "'");
  if (*ms > max) throw ConfigError("--" + name + ": out of range: " + v);
  return *ms;
}

bool to_bool(const std::string& name, const std::string& v) {
  auto l = lower(trim(v));
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  throw ConfigError("--" + name + ": not a boolean: '" + v + "'");
}

}  // namespace

std::optional<std::uint64_t> parse_size(const std::string& text) { return parse_byte_size(text); }

std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) return std::nullopt;  // bare IPv6 needs brackets
  }
  if (host.empty() || port.empty() || port.size() > 5) return std::nullopt;
  unsigned p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    p = p * 10 + static_cast<unsigned>(c - '0');
  }
  if (p > 65535) return std::nullopt;
  return std::make_pair(host, static_cast<std::uint16_t>(p));
}

std::vector<std::pair<std::string, std::string>> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::vector<std::pair<std::string, std::string>> out;
  if (trim(text).starts_with("{")) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw ConfigError(path + ": not a JSON object");
    for (const auto& [k, v] : j.items()) {
      if (v.is_string()) out.emplace_back(k, v.get<std::string>());
      else if (v.is_boolean() || v.is_number_unsigned() || v.is_number_integer()) out.emplace_back(k, v.dump());
      else throw ConfigError(path + ": value of '" + k + "' must be a string, number or boolean");
    }
    return out;
  }
  std::string line;
  int lineno = 0;
  std::istringstream lines(text);
  while (std::getline(lines, line)) {
    ++lineno;
    std::string t = trim(line);
    if (t.empty() || t.front() == '#' || t.front() == ';') continue;
    auto eq = t.find('=');
    if (eq == std::string::npos) throw ConfigError(path + ":" + std::to_string(lineno) + ": want key=value");
    std::string v = trim(t.substr(eq + 1));
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    out.emplace_back(trim(t.substr(0, eq)), v);
  }
  return out;
}

namespace {

using Kind = OptionSpec::Kind;

std::uint32_t to_u32_at_least_1(const std::string& n, const std::string& v) {
  auto x = static_cast<std::uint32_t>(to_u64(n, v, 1'000'000));
  if (x == 0) throw ConfigError("--" + n + ": at least 1");
  return x;
}

std::vector<std::string> to_list(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream list(v);
  for (std::string item; std::getline(list, item, ',');) {
    if (!trim(item).empty()) out.push_back(trim(item));
  }
  return out;
}

void set_listen(ServerConfig& c, const std::string& n, const std::string& v) {
  auto hp = parse_host_port(v);
  if (!hp) throw ConfigError("--" + n + ": want HOST:PORT, got '" + v + "'");
  c.listen_host = hp->first;
  c.listen_port = hp->second;
}

void set_resp_listen(ServerConfig& c, const std::string& n, const std::string& v) {
  auto hp = parse_host_port(v);
  if (!hp) throw ConfigError("--" + n + ": want HOST:PORT, got '" + v + "'");
  c.resp_listen_host = hp->first;
  c.resp_listen_port = hp->second;
  c.resp_enabled = true;
}

#define KC_SET(expr) [](ServerConfig& c, const std::string& n, const std::string& v) { (void)n; expr; }

const std::vector<OptionSpec> k_options = {
    {"listen", "KCACHE_LISTEN", "HOST:PORT to listen on (port 0: any free port)", "127.0.0.1:8420", Kind::value, set_listen},
    {"storage", "KCACHE_STORAGE",
     "memory:, disk:PATH, redis://[user:pass@]host:port/db or redis-cluster://[user:pass@]host:port,host:port/",
     "disk:./kcache-data", Kind::value, KC_SET(c.storage = v)},
    {"max-bytes", "KCACHE_MAX_BYTES", "storage byte budget, e.g. 20G (0: unlimited)", "0", Kind::value,
     KC_SET(c.max_bytes = to_size(n, v))},
    {"threads", "KCACHE_THREADS", "I/O threads (0: one per core)", "0", Kind::value,
     KC_SET(c.threads = static_cast<unsigned>(to_u64(n, v, 1024)))},
    {"storage-threads", "KCACHE_STORAGE_THREADS", "blocking storage pool threads (0: auto)", "0", Kind::value,
     KC_SET(c.storage_threads = static_cast<unsigned>(to_u64(n, v, 1024)))},
    {"lease-ttl-ms", "KCACHE_LEASE_TTL_MS", "lease time to live in ms (at least 100)", "60000", Kind::value,
     KC_SET(c.lease_ttl_ms = to_ms(n, v, 24ull * 3600 * 1000);
            if (c.lease_ttl_ms < 100) throw ConfigError("--lease-ttl-ms: at least 100"))},
    {"max-body-bytes", "KCACHE_MAX_BODY_BYTES", "largest accepted upload", "2G", Kind::value,
     KC_SET(c.max_body_bytes = to_size(n, v))},
    {"max-header-bytes", "KCACHE_MAX_HEADER_BYTES", "largest request line + headers (1K to 1M)", "16K", Kind::value,
     KC_SET(auto b = to_size(n, v);
            if (b < 1024 || b > (1u << 20)) throw ConfigError("--max-header-bytes: between 1K and 1M");
            c.max_header_bytes = static_cast<std::uint32_t>(b))},
    {"max-connections", "KCACHE_MAX_CONNECTIONS", "connections served at once", "1024", Kind::value,
     KC_SET(c.max_connections = to_u32_at_least_1(n, v))},
    {"read-timeout-ms", "KCACHE_READ_TIMEOUT_MS", "deadline for request headers and idle keep-alive", "30000",
     Kind::value, KC_SET(c.read_timeout_ms = to_ms(n, v, 3'600'000))},
    {"write-timeout-ms", "KCACHE_WRITE_TIMEOUT_MS", "base deadline for a body or a response", "30000", Kind::value,
     KC_SET(c.write_timeout_ms = to_ms(n, v, 3'600'000))},
    {"min-transfer-rate", "KCACHE_MIN_TRANSFER_RATE", "bytes/s a body must at least move at", "1M", Kind::value,
     KC_SET(c.min_transfer_rate = to_size(n, v);
            if (c.min_transfer_rate == 0) throw ConfigError("--min-transfer-rate: at least 1"))},
    {"max-wait-ms", "KCACHE_MAX_WAIT_MS", "largest ?wait_ms honoured", "600000", Kind::value,
     KC_SET(c.max_wait_ms = to_ms(n, v, 3'600'000))},
    {"drain-timeout-ms", "KCACHE_DRAIN_TIMEOUT_MS", "grace for in-flight requests on SIGTERM", "10000", Kind::value,
     KC_SET(c.drain_timeout_ms = to_ms(n, v, 3'600'000))},
    {"log-level", "KCACHE_LOG_LEVEL", "trace, debug, info, warn, error, off", "info", Kind::value,
     KC_SET(c.log_level = v)},
    {"access-log", "KCACHE_ACCESS_LOG", "one log line per request: true/false", "true", Kind::value,
     KC_SET(c.access_log = to_bool(n, v))},
    {"hot-cache-bytes", "KCACHE_HOT_CACHE_BYTES", "memory for recently read artifacts (0: off; off with redis)", "256M",
     Kind::value, KC_SET(c.hot_cache_bytes = to_size(n, v))},
    {"tokens", "KCACHE_TOKENS", "file of `TOKEN ROLE` lines (roles: read, write, admin); enables bearer auth", "",
     Kind::value, KC_SET(c.tokens_file = v)},
    {"namespaces", "KCACHE_NAMESPACES",
     "JSON file of namespaces: their tokens and roles, quotas, trust and retention (docs/namespaces.md); "
     "re-read on SIGHUP",
     "", Kind::value, KC_SET(c.namespaces_file = v)},
    {"ui", "KCACHE_UI", "serve the web page at /ui (docs/ui.md); its data needs the read role", "", Kind::flag,
     KC_SET(c.ui = to_bool(n, v))},
    {"anonymous-read", "KCACHE_ANONYMOUS_READ", "with --tokens: requests without a token get the read role", "",
     Kind::flag, KC_SET(c.anonymous_read = to_bool(n, v))},
    {"insecure-allow-remote", "KCACHE_INSECURE_ALLOW_REMOTE", "allow a non-loopback --listen without authentication",
     "", Kind::flag, KC_SET(c.insecure_allow_remote = to_bool(n, v))},
    {"tls-cert", "KCACHE_TLS_CERT", "PEM certificate chain; serve HTTPS", "", Kind::value, KC_SET(c.tls_cert = v)},
    {"tls-key", "KCACHE_TLS_KEY", "PEM private key of --tls-cert", "", Kind::value, KC_SET(c.tls_key = v)},
    {"tls-client-ca", "KCACHE_TLS_CLIENT_CA", "PEM CA bundle; require client certificates from it (mTLS)", "",
     Kind::value, KC_SET(c.tls_client_ca = v)},
    {"trusted-keys", "KCACHE_TRUSTED_KEYS", "PEM files of trusted Ed25519 public keys (repeat, or comma-separate)", "",
     Kind::list, KC_SET(for (auto& k : to_list(v)) c.trusted_keys.push_back(k))},
    {"require-signed", "KCACHE_REQUIRE_SIGNED", "refuse uploads not signed by a --trusted-keys key", "", Kind::flag,
     KC_SET(c.require_signed = to_bool(n, v))},
    {"max-upload-bytes-in-flight", "KCACHE_MAX_UPLOAD_BYTES_IN_FLIGHT",
     "request bodies held at once, all uploads together, in memory or spooled (0: 2 x max-body-bytes)", "0",
     Kind::value, KC_SET(c.max_upload_bytes_in_flight = to_size(n, v))},
    {"upload-spool-threshold", "KCACHE_UPLOAD_SPOOL_THRESHOLD",
     "uploads larger than this are spooled to a temporary file as they arrive (0: all)", "1M", Kind::value,
     KC_SET(c.upload_spool_threshold = to_size(n, v))},
    {"upload-spool-dir", "KCACHE_UPLOAD_SPOOL_DIR",
     "directory of the upload spool (unset: disk storage's tmp/, else $TMPDIR or /tmp)", "", Kind::value,
     KC_SET(c.upload_spool_dir = v)},
    {"resp-listen", "KCACHE_RESP_LISTEN", "HOST:PORT of the RESP (Redis protocol) endpoint; off when unset", "",
     Kind::value, set_resp_listen},
    {"resp-max-value-bytes", "KCACHE_RESP_MAX_VALUE_BYTES", "largest value a RESP SET accepts (at most 512M)", "512M",
     Kind::value,
     KC_SET(c.resp_max_value_bytes = to_size(n, v);
            if (c.resp_max_value_bytes == 0 || c.resp_max_value_bytes > (512ull << 20)) {
              throw ConfigError("--resp-max-value-bytes: between 1 and 512M (Redis's own limit)");
            })},
    {"resp-max-connections", "KCACHE_RESP_MAX_CONNECTIONS", "RESP connections open at once (its own budget)", "256",
     Kind::value, KC_SET(c.resp_max_connections = to_u32_at_least_1(n, v))},
    {"resp-idle-timeout-ms", "KCACHE_RESP_IDLE_TIMEOUT_MS", "close a RESP connection idle this long (0: never)",
     "300000", Kind::value, KC_SET(c.resp_idle_timeout_ms = to_ms(n, v, 86'400'000))},
    {"resp-auth-timeout-ms", "KCACHE_RESP_AUTH_TIMEOUT_MS",
     "close a RESP connection that has not authenticated this long after it connected (0: never)", "10000",
     Kind::value, KC_SET(c.resp_auth_timeout_ms = to_ms(n, v, 86'400'000))},
    {"resp-flight-window-ms", "KCACHE_RESP_FLIGHT_WINDOW_MS",
     "RESP single-flight: how long a GET miss holds a key for its compiler (0: off)", "60000", Kind::value,
     KC_SET(c.resp_flight_window_ms = to_ms(n, v, 3'600'000))},
    {"resp-flight-prefixes", "KCACHE_RESP_FLIGHT_PREFIXES", "RESP key prefixes with single-flight, comma-separated",
     "pt2:fx-graph,triton:", Kind::value, KC_SET(c.resp_flight_prefixes = to_list(v))},
    {"max-leases", "KCACHE_MAX_LEASES",
     "live leases held at once (in this process, or shared in Redis with Redis storage), and RESP single-flight "
     "windows (each)",
     "100000", Kind::value,
     KC_SET(c.max_leases = to_u64(n, v, 100'000'000);
            if (c.max_leases == 0) throw ConfigError("--max-leases: at least 1"))},
    {"resp-max-expiries", "KCACHE_RESP_MAX_EXPIRIES",
     "RESP keys with an expiry remembered at once; a SET EX/PX past it is refused", "1000000", Kind::value,
     KC_SET(c.resp_max_expiries = to_u64(n, v, 1'000'000'000))},
};

#undef KC_SET

std::string help_of(const OptionSpec& o) {
  std::string h = o.help;
  if (*o.default_text) h += std::string(" [") + o.default_text + "]";
  return h;
}

}  // namespace

const std::vector<OptionSpec>& server_options() { return k_options; }

std::string options_markdown() {
  std::string out = "| option | environment | default | what |\n| --- | --- | --- | --- |\n";
  for (const auto& o : k_options) {
    std::string name = std::string("`--") + o.name + (o.kind == Kind::flag ? "`" : " V`");
    std::string help = o.help;
    for (std::size_t i = 0; (i = help.find('|', i)) != std::string::npos; i += 2) help.replace(i, 1, "\\|");
    out += "| " + name + " | `" + o.env + "` | " + (*o.default_text ? std::string("`") + o.default_text + "`" : "") +
           " | " + help + " |\n";
  }
  out += "| `--config FILE` | `KCACHE_CONFIG` | | a file of `key=value` lines or one JSON object, keys named like the "
         "options without the dashes |\n";
  return out;
}

std::optional<ServerConfig> parse_config(int argc, const char* const* argv, std::string* help_text) {
  // The text each option ended up with: the command line or the
  // environment (CLI11), else the config file; empty: the default.
  struct Given {
    const OptionSpec* spec;
    std::string value;
    std::vector<std::string> items;  // Kind::list
    bool flag = false;
  };
  std::vector<Given> given;
  given.reserve(k_options.size());
  for (const auto& o : k_options) given.push_back({&o, {}, {}, false});

  CLI::App app{"kcache-server: the kcache compilation cache service"};
  app.option_defaults()->always_capture_default(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string config_path;
  app.add_option("--config", config_path, "config file: key=value lines or a JSON object")
      ->envname("KCACHE_CONFIG");
  for (auto& g : given) {
    const std::string flag = std::string("--") + g.spec->name;
    switch (g.spec->kind) {
      case Kind::value: app.add_option(flag, g.value, help_of(*g.spec))->envname(g.spec->env); break;
      case Kind::flag: app.add_flag(flag, g.flag, help_of(*g.spec))->envname(g.spec->env); break;
      case Kind::list:
        app.add_option(flag, g.items, help_of(*g.spec))
            ->envname(g.spec->env)
            ->delimiter(',')
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        break;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (help_text) *help_text = app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what());
  }
  for (auto& g : given) {
    if (g.spec->kind == Kind::flag && g.flag) g.value = "true";
    if (g.spec->kind == Kind::list) {
      for (const auto& item : g.items) g.value += (g.value.empty() ? "" : ",") + item;
    }
  }

  if (!config_path.empty()) {
    for (const auto& entry : load_config_file(config_path)) {
      const std::string& k = entry.first;  // not a structured binding: clang 14 cannot capture one
      const std::string& v = entry.second;
      auto it = std::find_if(given.begin(), given.end(), [&](const Given& g) { return k == g.spec->name; });
      if (it == given.end()) throw ConfigError(config_path + ": unknown key '" + k + "'");
      // The command line and the environment win; a flag from the file must
      // still be a boolean.
      if (it->spec->kind == Kind::flag) {
        if (!app.get_option(std::string("--") + k)->count() && to_bool(k, v)) it->value = "true";
        continue;
      }
      if (it->value.empty()) it->value = v;
    }
  }

  ServerConfig c;
  for (const auto& g : given) {
    if (!g.value.empty()) g.spec->set(c, g.spec->name, g.value);
  }
  if (c.anonymous_read && c.tokens_file.empty() && c.namespaces_file.empty()) {
    throw ConfigError("--anonymous-read needs --tokens or --namespaces");
  }
  if (c.require_signed && c.trusted_keys.empty()) throw ConfigError("--require-signed needs --trusted-keys");
  if (c.tls_cert.empty() != c.tls_key.empty()) throw ConfigError("--tls-cert and --tls-key go together");
  if (!c.tls_client_ca.empty() && c.tls_cert.empty()) throw ConfigError("--tls-client-ca needs --tls-cert and --tls-key");
  if (c.read_timeout_ms == 0 || c.write_timeout_ms == 0) throw ConfigError("timeouts must be > 0");
  if (c.max_upload_bytes_in_flight == 0) c.max_upload_bytes_in_flight = 2 * c.max_body_bytes;
  if (c.max_upload_bytes_in_flight < c.max_body_bytes) {
    throw ConfigError("--max-upload-bytes-in-flight: at least --max-body-bytes (one upload must fit)");
  }
  return c;
}

}  // namespace kcache::server
