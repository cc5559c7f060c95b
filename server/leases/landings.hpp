// Landings: wakes the GETs waiting on a key (?wait_ms) — on this server and,
// with replicas, on every server sharing the Redis — when the key's artifact
// lands or its lease ends without an upload.
//
// Local: publish() is Waiters::notify(). Redis (server/leases/redis_replicas.hpp):
// publish() also PUBLISHes the key on the channel `kcache:landed`, and a
// subscriber thread on a dedicated connection turns every message into a
// local notify. A waiter re-checks storage and the lease after any wake, so
// a duplicate or spurious wake costs one lookup, never a wrong answer; after
// the subscriber reconnects it wakes every waiter (messages may have been
// missed meanwhile).
// Thread safety: publish() may be called from any thread. Blocking: the
// Redis implementation does network I/O; call it on the blocking pool.
#pragma once

#include <memory>
#include <string>

#include "server/leases/waiters.hpp"

namespace kcache::server {

class Landings {
 public:
  virtual ~Landings() = default;
  virtual void publish(const std::string& key) = 0;
};

std::unique_ptr<Landings> make_local_landings(Waiters& waiters);

}  // namespace kcache::server
