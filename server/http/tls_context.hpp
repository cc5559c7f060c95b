// TlsContexts: the OpenSSL server context for HTTPS (--tls-cert, --tls-key)
// and mTLS (--tls-client-ca), rebuilt from its files on SIGHUP.
//
// Each accepted connection takes current() and keeps that shared_ptr for
// its whole life, so reload() changes what *new* connections get while the
// open ones carry on with the context they shook hands with.
// Settings: TLS 1.2 or newer, OpenSSL's default cipher list, no
// compression, no renegotiation. With a client CA, the handshake requires
// a client certificate that chains to it (verify_peer |
// verify_fail_if_no_peer_cert); a client without one never reaches HTTP.
// The private key is read from its file and never logged; a key that does
// not match the certificate is an error.
// Thread safety: current() and reload() may be called concurrently.
// Only this file's .cpp and http_session.cpp include Asio's SSL headers.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/result.hpp"
#include "common/tls_files.hpp"

namespace boost::asio::ssl {
class context;
}

namespace kcache::server {

// The server's files (common/tls_files.hpp): cert_file and key_file, the
// chain (leaf first) and its key, both required; ca_file, the bundle client
// certificates must chain to (empty: no client certificates).
using kcache::TlsFiles;

class TlsContexts {
 public:
  // invalid_argument naming the file and OpenSSL's reason when a file does
  // not load.
  static Result<std::unique_ptr<TlsContexts>> load(TlsFiles files);

  std::shared_ptr<boost::asio::ssl::context> current() const;
  // Rebuilds the context from the same paths; on failure the current one
  // stays in force.
  Status reload();
  bool requires_client_certs() const { return !files_.ca_file.empty(); }

 private:
  explicit TlsContexts(TlsFiles files) : files_(std::move(files)) {}
  static Result<std::shared_ptr<boost::asio::ssl::context>> build(const TlsFiles& files);

  const TlsFiles files_;
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> ctx_;  // GUARDED_BY(mu_)
};

}  // namespace kcache::server
