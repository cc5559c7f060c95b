// What an upload holds: UploadBody, a Beast request body that grows with
// the bytes that arrive, and UploadGrant, the share of
// --max-upload-bytes-in-flight a request holds until its body is gone
// (docs/protocol.md "Limits and deadlines"; internal to http_session.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

namespace kcache::server {

// A request body read into a vector that grows with the bytes that arrive:
// Beast's vector_body reserves the declared Content-Length up front, so a
// client declaring 2 GiB and sending 1 KiB made the server map 2 GiB.
struct UploadBody {
  using value_type = std::vector<std::uint8_t>;
  static std::uint64_t size(const value_type& v) { return v.size(); }
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      if (length) body_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, 1u << 20)));
      ec = {};
    }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      const std::size_t n = boost::asio::buffer_size(buffers);
      const std::size_t at = body_.size();
      body_.resize(at + n);
      ec = {};
      return boost::asio::buffer_copy(boost::asio::buffer(body_.data() + at, n), buffers);
    }
    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// Bytes of --max-upload-bytes-in-flight this request holds, returned when
// its body is gone.
class UploadGrant {
 public:
  UploadGrant() = default;
  UploadGrant(const UploadGrant&) = delete;
  UploadGrant& operator=(const UploadGrant&) = delete;
  ~UploadGrant() { release(); }
  // Takes n bytes of the budget; false (nothing taken) when they do not fit.
  bool take(std::atomic<std::uint64_t>& held, std::uint64_t budget, std::uint64_t n) {
    std::uint64_t cur = held.load();
    do {
      if (cur + n > budget) return false;
    } while (!held.compare_exchange_weak(cur, cur + n));
    held_ = &held;
    n_ = n;
    return true;
  }
  void release() {
    if (held_) held_->fetch_sub(n_);
    held_ = nullptr;
  }

 private:
  std::atomic<std::uint64_t>* held_ = nullptr;
  std::uint64_t n_ = 0;
};

}  // namespace kcache::server
