// PutFaultHook: fault injection for crash-safety tests.
//
// The disk and redis backends call before_publish() after an object's bytes
// are durably in their temporary place (temp file fsynced / temp chunk keys
// written with their TTL) and before the publish step that makes it visible.
// A test installs a hook that signals its parent and then sleeps, so that a
// SIGKILL provably lands mid-put. Production code passes no hook.
//
// KCACHE_FAULT_PAUSE_PUT_MS=N (read by open_backend()) installs a hook that
// sleeps N ms at that point, for end-to-end tests of kcache-server that
// cannot inject an object (each pause prints "kcache storage: put of <key>
// paused" on stderr: the test's event); it is logged on stderr at open so
// that it is never left on by accident. KCACHE_FAULT_PAUSE_READ_MS=N makes the disk
// backend's reads (get and read_range) pause N ms after reading an
// object's bytes, printing
// "kcache storage: read of <key> paused" on stderr first (a test's event:
// a read that races a removal, tests/python/server/test_resp_hot.py).
// Thread safety: before_publish() may be called concurrently.
#pragma once

#include <memory>
#include <string>

namespace kcache::storage {

class PutFaultHook {
 public:
  virtual ~PutFaultHook() = default;
  virtual void before_publish(const std::string& key) = 0;
  // Disk backend only, for tests: nonzero makes the fsync of the object's
  // directory after a publish fail with that errno.
  virtual int dir_sync_errno(const std::string& /*key*/) { return 0; }
  // Disk backend only, for tests: called after a get() or read_range() has
  // read an object's bytes and before it checks them (a test changes the
  // entry meanwhile, or holds a read in flight).
  virtual void after_read(const std::string& /*key*/) {}
};

// The hook KCACHE_FAULT_PAUSE_PUT_MS / _READ_MS ask for, or nullptr when both are unset.
std::shared_ptr<PutFaultHook> fault_hook_from_env();

// For tests, elsewhere than a backend: when the environment variable
// `env_name` holds N > 0, prints "kcache <what> paused" on stderr (the
// test's event) and sleeps N ms; otherwise does nothing. Used by
// KCACHE_FAULT_PAUSE_SCAN_MS: /v1/stats' shared scan of Redis storage
// (server/http/admin_routes.cpp) holds its result that long, so that
// requests sent after the line provably arrive while it runs.
void fault_pause(const char* env_name, const std::string& what);

}  // namespace kcache::storage
