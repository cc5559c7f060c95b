// kcache-server URLs, parsed one way by the client library (KCACHE_URL) and
// the CLI (--server): http[s]://host[:port][/prefix], IPv6 hosts in
// brackets, the port defaulting to 80 or 443, a trailing '/' of the prefix
// dropped; a bare host:port means http. Credentials in the URL are refused
// (tokens go in KCACHE_TOKEN / --token, never in a URL that gets logged).
// Errc::invalid_argument with the reason otherwise.
// Thread safety: pure function and value type.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"

namespace kcache {

struct HttpUrl {
  bool tls = false;
  std::string host;    // without brackets for IPv6
  std::string port;    // digits
  std::string prefix;  // path prefix without a trailing '/', may be empty
  // The Host header: the port only where it is not the scheme's default.
  std::string host_header() const;
};

Result<HttpUrl> parse_http_url(std::string_view text);

}  // namespace kcache
