#include "common/tls_files.hpp"

#include <openssl/err.h>

namespace kcache {
namespace {

Error failed(const std::string& what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  char buf[256] = {};
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  return make_error(Errc::invalid_argument, what + (e != 0 ? std::string(": ") + buf : std::string()));
}

}  // namespace

Status load_tls_files(SSL_CTX* ctx, const TlsFiles& files, const TlsFileNames& names, bool system_ca_by_default) {
  ERR_clear_error();
  if (!files.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, files.ca_file.c_str(), nullptr) != 1) {
      return failed(std::string(names.ca) + " " + files.ca_file);
    }
  } else if (system_ca_by_default && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return failed("the system CA store");
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return make_error(Errc::invalid_argument, std::string(names.cert) + " and " + names.key + " go together");
  }
  if (files.cert_file.empty()) return Ok{};
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return failed(std::string(names.cert) + " " + files.cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return failed(std::string(names.key) + " " + files.key_file);  // the path only, never the key
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return failed(std::string(names.key) + " " + files.key_file + " does not match " + names.cert + " " +
                  files.cert_file);
  }
  return Ok{};
}

}  // namespace kcache
