// What a waiting request learns of its client: set by the session while
// the request waits (an HTTP GET ?wait_ms on a lease, a RESP GET in a
// single-flight window; wait_watch.hpp watches the connection). When the
// client goes away the session marks `gone` and calls `on_gone` (both on
// the session's strand), so the wait ends and the connection is given back
// instead of being held until the wait's end.
#pragma once

#include <functional>

namespace kcache::server {

struct ClientWatch {
  bool gone = false;
  std::function<void()> on_gone;
};

}  // namespace kcache::server
