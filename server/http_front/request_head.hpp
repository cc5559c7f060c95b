#pragma once
// What the server takes from a parsed request head: method, target and the
// header fields with lowercased names. One function, used by the HTTP
// session and by the HTTP front-door fuzzer (fuzz/http_front_fuzz.cpp), so
// the fuzzer exercises the server's own conversion.
#include <cctype>
#include <string>

#include "server/http_front/http_types.hpp"

namespace kcache::server {

template <class Header>
void fill_request_head(const Header& h, Request& req) {
  req.method = std::string(h.method_string());
  req.target = std::string(h.target());
  for (const auto& f : h) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    req.headers.emplace_back(std::move(name), std::string(f.value()));
  }
}

}  // namespace kcache::server
