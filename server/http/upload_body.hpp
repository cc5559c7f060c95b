// What an upload holds: UploadBody, a Beast request body that grows with
// the bytes that arrive (in memory, then in an UploadSpool file), and
// UploadGrant, the share of --max-upload-bytes-in-flight a request holds
// until its body is gone
// (docs/protocol.md "Limits and deadlines"; internal to http_session.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include "server/http/upload_spool.hpp"

namespace kcache::server {

// Where an upload's bytes go: a vector while they are few, and once they
// pass `spool_above` (set only for routes that take a large body, with
// --upload-spool-threshold) an UploadSpool file in `spool_dir`, the bytes
// already held moved there first; from then on memory does not grow with
// the body. A failed spool write stops the read (spool_error says why).
// The write runs on the I/O thread, as Beast's body reader must: a copy
// into the page cache, cheap until the spool's file system throttles dirty
// pages, when it can stall that thread's other connections.
struct UploadBytes {
  std::vector<std::uint8_t> memory;
  std::unique_ptr<UploadSpool> spool;
  std::optional<std::uint64_t> spool_above;  // unset: never spool
  std::string spool_dir;
  std::optional<Error> spool_error;

  std::uint64_t size() const { return spool ? spool->size() : memory.size(); }
};

// A request body read into UploadBytes as the bytes arrive: Beast's
// vector_body reserves the declared Content-Length up front, so a client
// declaring 2 GiB and sending 1 KiB made the server map 2 GiB.
struct UploadBody {
  using value_type = UploadBytes;
  static std::uint64_t size(const value_type& v) { return v.size(); }
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      std::uint64_t in_memory = length.value_or(0);
      if (body_.spool_above) in_memory = std::min(in_memory, *body_.spool_above);
      body_.memory.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(in_memory, 1u << 20)));
      ec = {};
    }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      const std::size_t n = boost::asio::buffer_size(buffers);
      ec = {};
      if (!body_.spool && body_.spool_above && body_.memory.size() + n > *body_.spool_above) {
        auto spool = UploadSpool::create(body_.spool_dir);
        if (!spool) return fail(spool.error(), ec);
        body_.spool = std::move(*spool);
        if (auto s = body_.spool->append(body_.memory); !s) return fail(s.error(), ec);
        std::vector<std::uint8_t>().swap(body_.memory);
      }
      if (body_.spool) {
        std::size_t done = 0;
        for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
          boost::asio::const_buffer b(*it);
          auto s = body_.spool->append({static_cast<const std::uint8_t*>(b.data()), b.size()});
          if (!s) return fail(s.error(), ec);
          done += b.size();
        }
        return done;
      }
      const std::size_t at = body_.memory.size();
      body_.memory.resize(at + n);
      return boost::asio::buffer_copy(boost::asio::buffer(body_.memory.data() + at, n), buffers);
    }
    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    std::size_t fail(Error e, boost::beast::error_code& ec) {
      body_.spool_error = std::move(e);
      ec = boost::system::errc::make_error_code(boost::system::errc::io_error);
      return 0;
    }
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
