// The operator's web page (docs/ui.md): server/ui/index.html, embedded in
// the binary at build time (server/CMakeLists.txt generates ui_page.cpp),
// served at GET /ui when the server runs with --ui. It holds no data: its
// script reads GET /v1/ui/overview with the viewer's own credentials.
// Thread safety: returns a view of a constant.
#pragma once

#include <string_view>

namespace kcache::server {

std::string_view ui_page();

}  // namespace kcache::server
