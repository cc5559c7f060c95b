#include "storage/fault_hook.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kcache::storage {
namespace {

class SleepHook final : public PutFaultHook {
 public:
  explicit SleepHook(long ms) : ms_(ms) {}
  void before_publish(const std::string&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }

 private:
  long ms_;
};

}  // namespace

std::shared_ptr<PutFaultHook> fault_hook_from_env() {
  const char* v = std::getenv("KCACHE_FAULT_PAUSE_PUT_MS");
  if (v == nullptr || *v == '\0') return nullptr;
  long ms = std::strtol(v, nullptr, 10);
  if (ms <= 0) return nullptr;
  std::fprintf(stderr, "kcache storage: KCACHE_FAULT_PAUSE_PUT_MS=%ld: every put pauses before publish\n", ms);
  return std::make_shared<SleepHook>(ms);
}

}  // namespace kcache::storage
