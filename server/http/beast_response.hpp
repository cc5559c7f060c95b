// The HTTP response as Beast writes it: a Response (http_types.hpp) turned
// into a Beast message whose body is shared with the hot tier, not copied,
// and the deadline for writing it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include "server/config.hpp"
#include "server/http_front/http_types.hpp"

namespace kcache::server {

// A response body shared, not owned: the bytes stay alive through the
// shared_ptr while the write runs, and are never copied (a Beast Body).
struct SharedBody {
  using value_type = std::shared_ptr<const std::vector<std::uint8_t>>;
  static std::uint64_t size(const value_type& v) { return v ? v->size() : 0; }
  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;
    template <bool isRequest, class Fields>
    writer(const boost::beast::http::header<isRequest, Fields>&, const value_type& body) : body_(body) {}
    void init(boost::beast::error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec) {
      ec = {};
      if (done_ || size(body_) == 0) return boost::none;
      done_ = true;
      return {{const_buffers_type(body_->data(), body_->size()), false}};
    }

   private:
    const value_type& body_;
    bool done_ = false;
  };
};
using BeastResponse = boost::beast::http::response<SharedBody>;

// The message for r: status, headers, Server and X-Kcache-Request-Id, the
// body (none for HEAD, whose Content-Length is r.head_length or the body's).
BeastResponse to_beast(Response&& r, unsigned version, bool head, bool keep_alive, std::uint64_t request_id);

// How long writing `bytes` may take: --write-timeout-ms plus the bytes at
// --min-transfer-rate.
inline std::chrono::milliseconds transfer_deadline(const ServerConfig& c, std::uint64_t bytes) {
  return std::chrono::milliseconds(c.write_timeout_ms + bytes * 1000 / c.min_transfer_rate);
}

}  // namespace kcache::server
