#include "common/http_url.hpp"

#include <algorithm>

namespace kcache {

Result<HttpUrl> parse_http_url(std::string_view text) {
  HttpUrl u;
  std::string_view rest = text;
  if (auto p = text.find("://"); p != std::string_view::npos) {
    const std::string_view scheme = text.substr(0, p);
    if (scheme != "http" && scheme != "https") {
      return make_error(Errc::invalid_argument, "the URL must start with http:// or https://");
    }
    u.tls = scheme == "https";
    rest = text.substr(p + 3);
  }
  auto slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    u.prefix = std::string(rest.substr(slash));
    while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  }
  if (hostport.find('@') != std::string_view::npos) {
    return make_error(Errc::invalid_argument, "credentials in the URL are not supported (use a token)");
  }
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return make_error(Errc::invalid_argument, "bad IPv6 host in the URL: no ']'");
    u.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return make_error(Errc::invalid_argument, "expected ':' after the IPv6 host");
      port = after.substr(1);
    }
  } else {
    auto colon = hostport.rfind(':');
    u.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) port = hostport.substr(colon + 1);
  }
  if (u.host.empty()) return make_error(Errc::invalid_argument, "the URL has no host");
  if (port.empty()) {
    u.port = u.tls ? "443" : "80";
  } else {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return make_error(Errc::invalid_argument, "bad port in the URL");
    }
    u.port = std::string(port);
  }
  return u;
}

std::string HttpUrl::host_header() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  bool default_port = (tls && port == "443") || (!tls && port == "80");
  return default_port ? h : h + ":" + port;
}

}  // namespace kcache
