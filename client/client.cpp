// kcache::Client: construction from a config and the public methods; the
// tiers and the single-flight flow are in client/client_impl.hpp.
#include "client/client.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/client_impl.hpp"

namespace kcache {

const char* source_name(Source s) noexcept {
  switch (s) {
    case Source::node: return "node";
    case Source::server: return "server";
    case Source::compiled: return "compiled";
    case Source::local: return "local";
  }
  return "local";
}

namespace {

// A PEM value in the config is the text itself or a path to it.
Result<std::string> pem_text(const std::string& value, const char* what) {
  if (value.find("-----BEGIN") != std::string::npos) return value;
  std::ifstream in(value, std::ios::binary);
  if (!in)
    return make_error(Errc::invalid_argument, std::string("cannot read ") + what + " " + value);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// XDG_CACHE_HOME, HOME, or the user's home from the password database;
// empty when none is known. Never a shared temp directory: another local
// user could create it first and plant bundles or a miss-log symlink.
std::string default_local_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/kcache";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/kcache";
  }
  struct passwd pw{};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && found->pw_dir[0] == '/' && std::string(found->pw_dir) != "/") {
    return std::string(found->pw_dir) + "/.cache/kcache";
  }
  return {};
}

// The node tier's directory must be this user's own and writable by no one
// else (created 0700 when missing); otherwise its bundles and its miss log
// could be someone else's.
Status usable_node_dir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec)) {
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return make_error(Errc::io_error, "cannot create " + dir);
  if (!S_ISDIR(st.st_mode)) return make_error(Errc::invalid_argument, dir + " is not a directory");
  if (st.st_uid != ::getuid()) return make_error(Errc::invalid_argument, dir + " belongs to another user");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return make_error(Errc::invalid_argument, dir + " is writable by others");
  return Ok{};
}

std::string default_client_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + " pid " + std::to_string(::getpid());
}

}  // namespace


Result<std::unique_ptr<Client>> Client::create(ClientConfig config) {
  try {
    auto impl = std::make_unique<Impl>();
    if (!client::set_log_level(config.log_level)) {
      return make_error(Errc::invalid_argument, "unknown log level '" + config.log_level + "'");
    }
    if (!config.ns.empty()) {
      if (auto st = check_namespace(config.ns); !st) return st.error();
    }
    if (config.node_tier) {
      if (config.local_dir.empty()) config.local_dir = default_local_dir();
      const Status usable = config.local_dir.empty()
                                ? Status(make_error(Errc::invalid_argument,
                                                    "no XDG_CACHE_HOME, HOME or home directory to keep it in"))
                                : usable_node_dir(config.local_dir);
      if (usable.ok()) {
        // Each namespace's bundles in a folder of their own: a node shared
        // by two teams never hands one team's bundle to the other.
        const bool own_ns = !config.ns.empty() && config.ns != "default";
        impl->node.emplace(own_ns ? config.local_dir + "/namespaces/" + config.ns : config.local_dir,
                           config.local_max_bytes);
        if (config.miss_log.empty()) config.miss_log = config.local_dir + "/misses.jsonl";
      } else {
        log(LogLevel::warn, "node tier off: " + usable.error().message + " (set KCACHE_LOCAL_DIR)");
        config.node_tier = false;
      }
    }
    impl->miss_log = config.miss_log == "none" ? std::string() : config.miss_log;
    for (const auto& entry : config.trusted_keys) {
      auto pem = pem_text(entry, "trusted key");
      if (!pem.ok()) return pem.error();
      auto id = impl->trust.add_public_pem(*pem);
      if (!id.ok())
        return make_error(
            id.error().code,
            "trusted key " +
                (entry.find("-----BEGIN") == std::string::npos ? entry : std::string("(PEM)")) +
                ": " + id.error().message);
    }
    if (!config.signing_key.empty()) {
      auto pem = pem_text(config.signing_key, "signing key");
      if (!pem.ok()) return pem.error();
      auto key = artifact::SigningKey::from_private_pem(*pem);
      if (!key.ok()) return make_error(key.error().code, "signing key: " + key.error().message);
      impl->signer = std::move(key).value();
    }
    if (!config.url.empty()) {
      auto url = client::Url::parse(config.url);
      if (!url.ok())
        return make_error(Errc::invalid_argument, "KCACHE_URL: " + url.error().message);
      client::Timeouts t;
      t.connect_ms = config.connect_timeout_ms;
      t.request_ms = config.request_timeout_ms;
      t.min_rate = config.min_transfer_rate;
      auto http = client::HttpClient::create(
          *url, {config.ca_file, config.client_cert, config.client_key}, t);
      if (!http.ok()) return http.error();
      impl->breaker = std::make_shared<client::CircuitBreaker>(config.breaker_threshold,
                                                               config.breaker_cooldown_ms);
      if (config.client_name.empty()) config.client_name = default_client_name();
      impl->server = std::make_unique<client::ServerApi>(
          std::move(http).value(), client::RetryPolicy{config.retries, config.retry_base_ms, 2000},
          impl->breaker, config.token, config.client_name, config.ns);
    }
    impl->cfg = std::move(config);
    log(LogLevel::debug, "client: " + impl->cfg.describe());
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  } catch (const std::exception& e) {
    return make_error(Errc::internal, e.what());
  }
}

Result<std::unique_ptr<Client>> Client::from_env() {
  auto cfg = ClientConfig::from_env();
  if (!cfg.ok()) return cfg.error();
  return create(std::move(cfg).value());
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  try {
    auto s = impl_->snapshot();
    if (s.node_hits + s.server_hits + s.misses + s.compiles > 0)
      log(LogLevel::info, client::stats_line(s));
  } catch (...) {
  }
}

Result<std::optional<std::vector<std::uint8_t>>> Client::get(std::string_view key) {
  try {
    // get() is lookup() without the tier.
    auto r = impl_->lookup(key);
    if (!r.ok()) return r.error();
    if (!*r) return std::optional<std::vector<std::uint8_t>>();
    return std::optional<std::vector<std::uint8_t>>(std::move((*r)->bundle));
  } catch (const std::exception& e) {
    return make_error(Errc::internal, e.what());
  }
}

Result<bool> Client::put(std::string_view key, std::span<const std::uint8_t> bundle) {
  try {
    return impl_->put(key, bundle);
  } catch (const std::exception& e) {
    return make_error(Errc::internal, e.what());
  }
}

void Client::note_check_failure(std::string_view key, std::string_view explanation,
                                const std::vector<std::string>& failures) {
  try {
    impl_->note_check_failure(key, explanation, failures);
  } catch (const std::exception&) {  // a log line is never worth an error
  }
}

void Client::drop_node_copy(std::string_view key) const {
  if (impl_->node && artifact::is_cache_key_hex(key)) impl_->node->remove(key);
}

Result<Fetched> Client::get_or_compile(std::string_view key, const CompileFn& compile,
                                       std::string_view explanation) {
  try {
    return impl_->get_or_compile(key, compile, explanation);
  } catch (const std::exception& e) {
    return make_error(Errc::internal, e.what());
  }
}

Result<std::optional<Fetched>> Client::try_get_or_compile(std::string_view key,
                                                          const CompileFn& compile,
                                                          std::string_view explanation) {
  try {
    return impl_->fetch_or_compile(key, compile, explanation, /*wait=*/false);
  } catch (const std::exception& e) {
    return make_error(Errc::internal, e.what());
  }
}

Result<std::optional<Fetched>> Client::lookup(std::string_view key) {
  try {
    return impl_->lookup(key);
  } catch (const std::exception& e) {
    return make_error(Errc::internal, e.what());
  }
}

bool Client::report_cold_start(const std::string& json) {
  if (!impl_->server) return false;
  auto r = impl_->server->report_cold_start(json);
  if (!r.ok()) client::log(client::LogLevel::info, "cold-start report not sent: " + r.error().message);
  return r.ok();
}

ClientStats Client::stats() const {
  return impl_->snapshot();
}
std::string Client::stats_json() const {
  return client::stats_json(impl_->snapshot());
}
std::string Client::stats_line() const {
  return client::stats_line(impl_->snapshot());
}
const ClientConfig& Client::config() const {
  return impl_->cfg;
}

}  // namespace kcache
