#include "storage/fault_hook.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kcache::storage {
namespace {

long env_ms(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  long ms = std::strtol(v, nullptr, 10);
  return ms > 0 ? ms : 0;
}

class SleepHook final : public PutFaultHook {
 public:
  SleepHook(long put_ms, long read_ms) : put_ms_(put_ms), read_ms_(read_ms) {}
  void before_publish(const std::string& key) override {
    if (put_ms_ == 0) return;
    // The test's event: the object's bytes are written, the pause begins.
    std::fprintf(stderr, "kcache storage: put of %s paused\n", key.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(put_ms_));
  }
  void after_read(const std::string& key) override {
    if (read_ms_ == 0) return;
    // The line is the test's event: the bytes are read, the pause begins.
    std::fprintf(stderr, "kcache storage: read of %s paused\n", key.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(read_ms_));
  }

 private:
  long put_ms_;
  long read_ms_;
};

}  // namespace

std::shared_ptr<PutFaultHook> fault_hook_from_env() {
  const long put_ms = env_ms("KCACHE_FAULT_PAUSE_PUT_MS");
  const long read_ms = env_ms("KCACHE_FAULT_PAUSE_READ_MS");
  if (put_ms == 0 && read_ms == 0) return nullptr;
  if (put_ms > 0) std::fprintf(stderr, "kcache storage: KCACHE_FAULT_PAUSE_PUT_MS=%ld: every put pauses before publish\n", put_ms);
  if (read_ms > 0) std::fprintf(stderr, "kcache storage: KCACHE_FAULT_PAUSE_READ_MS=%ld: every disk read pauses after reading\n", read_ms);
  return std::make_shared<SleepHook>(put_ms, read_ms);
}

void fault_pause(const char* env_name, const std::string& what) {
  const long ms = env_ms(env_name);
  if (ms == 0) return;
  std::fprintf(stderr, "kcache %s paused\n", what.c_str());
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace kcache::storage
