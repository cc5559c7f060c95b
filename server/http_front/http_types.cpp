#include "server/http_front/http_types.hpp"

#include <nlohmann/json.hpp>

namespace kcache::server {

Response json_response(int status, const nlohmann::json& body) {
  Response r;
  r.status = status;
  std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  r.body.assign(text.begin(), text.end());
  r.set("Content-Type", "application/json");
  return r;
}

Response error_response(int status, std::string_view code, std::string_view message) {
  return json_response(status, {{"error", code}, {"message", message}});
}

Response text_response(int status, std::string_view text, std::string_view content_type) {
  Response r;
  r.status = status;
  r.body.assign(text.begin(), text.end());
  r.set("Content-Type", std::string(content_type));
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
  }
}

}  // namespace kcache::server
