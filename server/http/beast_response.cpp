#include "server/http/beast_response.hpp"

#include <string>

#include <boost/beast/http/field.hpp>

namespace kcache::server {

namespace http = boost::beast::http;

BeastResponse to_beast(Response&& r, unsigned version, bool head, bool keep_alive, std::uint64_t request_id) {
  BeastResponse res;
  res.version(version);
  res.result(static_cast<unsigned>(r.status));
  res.set(http::field::server, "kcache/0.1");
  res.set("X-Kcache-Request-Id", std::to_string(request_id));
  for (auto& [k, v] : r.headers) res.insert(k, v);
  const std::uint64_t length = r.shared_body ? r.shared_body->size() : r.body.size();
  if (head) {
    res.content_length(r.head_length ? *r.head_length : length);
  } else {
    res.body() = r.shared_body ? std::move(r.shared_body)
                               : std::make_shared<const std::vector<std::uint8_t>>(std::move(r.body));
    res.content_length(length);
  }
  res.keep_alive(keep_alive);
  return res;
}

}  // namespace kcache::server
