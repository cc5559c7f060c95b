// SlotMap: which master serves each of Redis Cluster's 16384 hash slots, as
// one node's CLUSTER SLOTS reply describes it, plus the replicas it lists.
// An immutable value: the router swaps in a new one on a refresh.
// Thread safety: const after construction.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/result.hpp"
#include "redis/link.hpp"
#include "redis/slots.hpp"

namespace kcache::redis {

struct SlotMap {
  std::vector<Endpoint> masters;   // each once, in reply order
  std::vector<Endpoint> replicas;  // each once
  std::array<std::int16_t, k_slot_count> owner{};  // index into masters; -1: no master serves the slot

  // The master serving `slot`, or nullptr.
  const Endpoint* master_of(int slot) const {
    int i = owner[static_cast<std::size_t>(slot)];
    return i < 0 ? nullptr : &masters[static_cast<std::size_t>(i)];
  }
  std::size_t served_slots() const;
};

// Parses a CLUSTER SLOTS reply. `asked` is the node that sent it: Redis
// writes an empty host for "the node you are talking to". Errc::internal
// for a reply of the wrong shape.
Result<SlotMap> parse_cluster_slots(const redisReply* reply, const Endpoint& asked);

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" -> the endpoint;
// nullopt if `message` is neither (or malformed).
std::optional<Endpoint> redirect_target(std::string_view message, std::string_view kind);

}  // namespace kcache::redis
