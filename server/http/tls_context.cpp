#include "server/http/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>

namespace kcache::server {

namespace ssl = boost::asio::ssl;

namespace {

std::string reason(const boost::system::error_code& ec) {
  std::string r = ec.message();
  // Asio's message for OpenSSL errors is often just "error"; add the library's.
  if (auto code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    r += std::string(" (") + buf + ")";
  }
  ERR_clear_error();
  return r;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> TlsContexts::build(const TlsFiles& files) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use |
                       ssl::context::no_compression,
                   ec);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION);
  // Session tickets would let a client resume with a context's keys after a
  // reload; full handshakes keep "new connections use the new context" exact.
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  if (auto s = load_tls_files(native, files, {"--tls-client-ca", "--tls-cert", "--tls-key"},
                              /*system_ca_by_default=*/false);
      !s) {
    return s.error();
  }
  if (!files.ca_file.empty()) {
    // Tell clients which CAs we accept (certificate_authorities).
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(native, names);
    }
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return make_error(Errc::internal, "TLS verify mode: " + reason(ec));
  }
  return ctx;
}

Result<std::unique_ptr<TlsContexts>> TlsContexts::load(TlsFiles files) {
  auto ctx = build(files);
  if (!ctx) return ctx.error();
  std::unique_ptr<TlsContexts> out(new TlsContexts(std::move(files)));
  out->ctx_ = std::move(*ctx);
  return out;
}

std::shared_ptr<ssl::context> TlsContexts::current() const {
  std::lock_guard lock(mu_);
  return ctx_;
}

Status TlsContexts::reload() {
  auto ctx = build(files_);
  if (!ctx) return ctx.error();
  std::lock_guard lock(mu_);
  ctx_ = std::move(*ctx);
  return Ok{};
}

}  // namespace kcache::server
