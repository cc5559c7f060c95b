// TLS files, named and loaded one way by the server, the client library and
// the CLI: a CA bundle to verify the peer with, a certificate chain and its
// private key (PEM files; empty: not used).
//
// load_tls_files() puts them into an OpenSSL context: the CA bundle as the
// verify locations (empty: the system store when `system_ca_by_default`,
// else none), then the chain and the key — both or neither — and checks
// that the key matches the chain. Errors are Errc::invalid_argument naming
// the option (`names`: "--tls-cert", "KCACHE_CLIENT_CERT" …) and the path
// with OpenSSL's reason; never a key's bytes. It leaves the verify mode and
// protocol versions to the caller (a server and a client differ there).
// Thread safety: call before the context is shared.
#pragma once

#include <openssl/ssl.h>

#include <string>

#include "common/result.hpp"

namespace kcache {

struct TlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// How the three files are named where they were given (for messages).
struct TlsFileNames {
  const char* ca;
  const char* cert;
  const char* key;
};

Status load_tls_files(SSL_CTX* ctx, const TlsFiles& files, const TlsFileNames& names, bool system_ca_by_default);

}  // namespace kcache
