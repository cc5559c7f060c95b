#include "server/http/request_read.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <spdlog/spdlog.h>

namespace kcache::server {

namespace beast = boost::beast;
namespace http = beast::http;

bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

std::optional<Response> head_read_failure(const beast::error_code& ec, const ServerConfig& cfg) {
  if (ec == http::error::body_limit) {
    return error_response(413, "too_large",
                          "the body exceeds the limit of " + std::to_string(cfg.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return error_response(431, "headers_too_large",
                          "request line and headers exceed " + std::to_string(cfg.max_header_bytes) + " bytes");
  }
  if (is_parse_error(ec)) return error_response(400, "bad_request", "malformed HTTP request: " + ec.message());
  return std::nullopt;
}

std::optional<Response> body_read_failure(const beast::error_code& ec, const std::optional<Error>& spool_error,
                                          std::uint64_t limit, const std::string& route, Services& s,
                                          ConnLog log) {
  if (spool_error) {
    spdlog::warn("conn={} peer={} upload refused: {}", log.conn, log.peer, spool_error->message);
    s.metrics.puts_rejected.fetch_add(1, std::memory_order_relaxed);
    s.metrics.storage_error("spool");
    auto r = spool_error->code == Errc::full
                 ? error_response(507, "spool_full",
                                  "no room on the server to hold the upload, nothing stored (" +
                                      spool_error->message + "); retry later")
                 : error_response(500, "spool_error",
                                  "the server could not hold the upload, nothing stored (" + spool_error->message + ")");
    if (spool_error->code == Errc::full) r.headers.emplace_back("Retry-After", "5");
    r.route = route;
    r.close = true;
    return r;
  }
  if (ec == http::error::body_limit) {
    auto r = error_response(413, "too_large", "the body exceeds the limit of " + std::to_string(limit) + " bytes");
    r.route = route;
    r.close = true;
    return r;
  }
  if (ec == beast::error::timeout) {
    spdlog::info("conn={} peer={} cut off: request body not complete in time", log.conn, log.peer);
  } else if (ec == http::error::partial_message || ec == http::error::end_of_stream || ec == boost::asio::error::eof) {
    spdlog::info("conn={} peer={} closed mid-body; request dropped", log.conn, log.peer);
  } else if (is_parse_error(ec)) {
    return error_response(400, "bad_request", "malformed body: " + ec.message());
  }
  return std::nullopt;
}

}  // namespace kcache::server
