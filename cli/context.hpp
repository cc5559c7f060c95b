// Context: what every command gets — where the server is, how to print,
// and the exit codes (docs/cli.md "Exit codes").
//
// Commands return Status; main() turns an Error into a message on stderr
// and an exit code: Errc::not_found → 3, Errc::invalid_argument → 2 (usage),
// anything else → 1.
#pragma once

#include <chrono>
#include <string>

#include "common/result.hpp"

namespace kcache::cli {

inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_error = 1;
inline constexpr int k_exit_usage = 2;
inline constexpr int k_exit_not_found = 3;

inline int exit_code_for(Errc code) {
  if (code == Errc::not_found) return k_exit_not_found;
  if (code == Errc::invalid_argument) return k_exit_usage;
  return k_exit_error;
}

inline Error usage_error(std::string message) {
  return make_error(Errc::invalid_argument, std::move(message));
}

struct Context {
  std::string server = "http://127.0.0.1:8420";  // --server / KCACHE_URL
  std::string token;                             // --token / KCACHE_TOKEN; never printed
  std::string ns;                                // --namespace / KCACHE_NAMESPACE; empty: not sent
  std::string ca_file;                           // --cacert / KCACHE_CA_FILE (https)
  std::string cert_file;                         // --cert / KCACHE_CLIENT_CERT (mTLS)
  std::string key_file;                          // --key / KCACHE_CLIENT_KEY (mTLS)
  bool json = false;                             // --json: machine-readable stdout
  double timeout_s = 30;                         // --timeout: per request
  bool timeout_given = false;                    // verify waits longer unless set
  std::string command;                           // "stats", "ls", … for messages
};

}  // namespace kcache::cli
