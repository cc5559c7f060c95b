// ServerConfig: everything kcache-server is told at startup, and where it
// comes from.
//
// Precedence, highest first: the command line, KCACHE_* environment
// variables, the --config file (key=value lines or one JSON object, keys
// named like the long options without the dashes), built-in defaults.
// Configuration errors throw ConfigError; this is startup code, the one place
// exceptions are used (STYLE.md).
// Thread safety: plain value type, built once in main() and then read-only.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kcache::server {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ServerConfig {
  // Address to bind. Port 0 picks a free port; the bound one is printed as
  // "listening on HOST:PORT" on stdout.
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8420;
  // Storage URI for storage::open_backend().
  std::string storage = "disk:./kcache-data";
  // Byte budget handed to the backend; 0 means unlimited.
  std::uint64_t max_bytes = 0;
  // I/O threads running the io_context (0: hardware concurrency, at least 2).
  unsigned threads = 0;
  // Threads of the blocking pool that runs every storage call and bundle
  // verification (0: twice the I/O threads, at least 4).
  unsigned storage_threads = 0;
  // Lease time to live; a holder renews before it runs out.
  std::uint64_t lease_ttl_ms = 60'000;
  // Largest accepted request body (a bundle upload); larger is 413.
  std::uint64_t max_body_bytes = 2ull << 30;
  // Largest accepted request line plus headers; larger is 431.
  std::uint32_t max_header_bytes = 16 * 1024;
  // Request bodies held at once, all connections together, in memory or in
  // the upload spool: an upload that would pass it is answered 503
  // (Retry-After) before its body is read. It also bounds the spool's disk
  // use. 0: twice --max-body-bytes.
  std::uint64_t max_upload_bytes_in_flight = 0;
  // An artifact upload larger than this goes to a nameless temporary file
  // in upload_spool_dir as it arrives, not to memory (0: every upload).
  std::uint64_t upload_spool_threshold = 1ull << 20;
  // Empty: the disk storage's tmp/ with disk:PATH storage, else $TMPDIR or
  // /tmp (server/http/upload_spool.hpp); checked at startup.
  std::string upload_spool_dir;
  // Bodies of routes other than PUT /v1/artifacts are small JSON.
  std::uint64_t max_json_body_bytes = 1 << 20;
  // Connections beyond this are answered 503 with Retry-After and closed.
  std::uint32_t max_connections = 1024;
  // Deadline for a request's headers, and for an idle keep-alive connection
  // waiting for its next request.
  std::uint64_t read_timeout_ms = 30'000;
  // Deadline for a body or a response: write_timeout_ms plus the time the
  // bytes take at min_transfer_rate (so a 1 GiB upload is not cut off, but a
  // client trickling one byte a second is).
  std::uint64_t write_timeout_ms = 30'000;
  std::uint64_t min_transfer_rate = 1ull << 20;  // bytes per second
  // Longest ?wait_ms a GET may ask for; larger values are clamped.
  std::uint64_t max_wait_ms = 600'000;
  // On SIGTERM/SIGINT, in-flight requests get this long to finish.
  std::uint64_t drain_timeout_ms = 10'000;
  // Listening on a non-loopback address without authentication (--tokens,
  // or mTLS through --tls-client-ca) is refused unless this is set.
  bool insecure_allow_remote = false;
  // Bearer tokens: a file of `TOKEN ROLE` lines (server/http_front/authorizer.hpp).
  // Empty: no tokens; every role for loopback clients only.
  std::string tokens_file;
  // With tokens: requests without an Authorization header get the read role.
  bool anonymous_read = false;
  // Namespaces (server/http_front/namespace_file.hpp, docs/namespaces.md): a JSON
  // file of namespaces with their tokens, quotas, trust and retention.
  // Empty: one namespace, "default".
  std::string namespaces_file;
  // Serve the web page at GET /ui (docs/ui.md); its data, GET
  // /v1/ui/overview, needs the read role like the rest of /v1.
  bool ui = false;
  // Refuse uploads that are not signed by a key in trusted_keys (400).
  bool require_signed = false;
  // PEM files of trusted Ed25519 public keys (each may hold several keys).
  std::vector<std::string> trusted_keys;
  // TLS: certificate chain and private key (PEM files). Both or neither.
  std::string tls_cert;
  std::string tls_key;
  // mTLS: CA bundle (PEM) that client certificates must chain to; clients
  // without one are refused in the handshake. Needs tls_cert.
  std::string tls_client_ca;
  // Memory for recently read artifacts, served without a storage call
  // (server/hot_tier.hpp). 0 disables it; always off with redis:// storage.
  std::uint64_t hot_cache_bytes = 256ull << 20;
  std::string log_level = "info";
  bool access_log = true;
  // RESP endpoint (server/resp/resp_session.hpp, docs/protocol.md "RESP"): off
  // unless --resp-listen is given. Same auth, storage, limits and metrics.
  bool resp_enabled = false;
  std::string resp_listen_host = "127.0.0.1";
  std::uint16_t resp_listen_port = 6380;
  std::uint64_t resp_max_value_bytes = 512ull << 20;
  // RESP's own connection budget (HTTP keeps --max-connections to itself).
  std::uint32_t resp_max_connections = 256;
  // A RESP connection with no command in progress is closed after this
  // long (0: never, as Redis's default). A command that has started must
  // finish within read_timeout_ms plus its declared bytes at
  // min_transfer_rate, however its bytes trickle in.
  std::uint64_t resp_idle_timeout_ms = 300'000;
  // A RESP connection that has not authenticated (no token giving it read
  // access) this long after it connected is closed, whatever it sends: a
  // peer without a token cannot hold a slot of RESP's connection budget for
  // the idle timeout (0: never; as sshd's LoginGraceTime). With no tokens
  // configured every connection may read, so this never applies.
  std::uint64_t resp_auth_timeout_ms = 10'000;
  // Implicit single-flight: a GET miss on a key with one of these prefixes
  // makes the caller its compiler for this long; other GETs of the key wait
  // for its SET (0: off).
  std::uint64_t resp_flight_window_ms = 60'000;
  std::vector<std::string> resp_flight_prefixes = {"pt2:fx-graph", "triton:"};
  // Live leases held at once: in this process with disk: or memory:
  // storage; in the shared live set with Redis storage (every replica
  // applies its own value to that one set), and, separately, RESP
  // single-flight windows: past it a lease is 503 too_many_leases and a
  // GET miss opens no window.
  std::uint64_t max_leases = 100'000;
  // RESP keys with an expiry (SET EX/PX/EXAT/PXAT) remembered at once; past
  // it such a SET is refused. Expired ones are removed (from storage too)
  // every second.
  std::uint64_t resp_max_expiries = 1'000'000;

  bool operator==(const ServerConfig&) const = default;
};

// One option of kcache-server, declared once (server/config.cpp's table):
// parsing, --help and docs/operations.md's option list (options_markdown(),
// checked by server_config_test) all come from it. `default_text` is what
// --help and the docs show; ServerConfig's member initialisers hold the
// defaults, and server_config_test checks that each default_text, set,
// changes nothing.
struct OptionSpec {
  enum class Kind { value, flag, list };  // flag: a switch (true/false in a file); list: repeatable, comma-separated
  const char* name;  // long option without dashes; also the config-file key
  const char* env;
  const char* help;
  const char* default_text;  // "" where the default is "unset"
  Kind kind;
  void (*set)(ServerConfig& c, const std::string& name, const std::string& value);  // throws ConfigError
};

const std::vector<OptionSpec>& server_options();
// The option list as a Markdown table (docs/operations.md "Options").
std::string options_markdown();

// Parses argv, the environment and the optional config file. Throws
// ConfigError with a readable message on bad input; `help_text` receives the
// usage text and the function returns nullopt when --help was asked for.
std::optional<ServerConfig> parse_config(int argc, const char* const* argv, std::string* help_text);

// kcache::parse_byte_size (common/units.hpp): "20G", "500M", "64k",
// "1.5GiB", "123" → bytes; the client and the CLI accept the same spellings.
std::optional<std::uint64_t> parse_size(const std::string& text);

// "HOST:PORT" or "[V6]:PORT" → host, port. nullopt when malformed.
std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text);

// Loads a config file into (key, value) pairs. JSON if the first non-blank
// character is '{', else key=value lines ('#' comments). Throws ConfigError.
std::vector<std::pair<std::string, std::string>> load_config_file(const std::string& path);

}  // namespace kcache::server
