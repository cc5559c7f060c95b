#include "server/leases/landings.hpp"

namespace kcache::server {

namespace {

class LocalLandings final : public Landings {
 public:
  explicit LocalLandings(Waiters& w) : waiters_(w) {}
  void publish(const std::string& key) override { waiters_.notify(key); }

 private:
  Waiters& waiters_;
};

}  // namespace

std::unique_ptr<Landings> make_local_landings(Waiters& waiters) { return std::make_unique<LocalLandings>(waiters); }

}  // namespace kcache::server
