// The Redis Cluster router (redis/cluster.hpp).
#include "redis/cluster.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace kcache::redis {
namespace {

bool is_multi(const Args& a) { return !a.empty() && (a[0] == "MULTI" || a[0] == "multi"); }
bool ends_multi(const Args& a) {
  return !a.empty() && (a[0] == "EXEC" || a[0] == "exec" || a[0] == "DISCARD" || a[0] == "discard");
}

std::string_view error_text(const Reply& r) {
  if (!r || r->type != REDIS_REPLY_ERROR) return {};
  return {r->str, r->len};
}

bool starts(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// WAIT counts the replicas that acknowledged the writes of the connection it
// runs on, so it must travel with the command before it.
bool is_wait(const Args& a) { return !a.empty() && (a[0] == "WAIT" || a[0] == "wait"); }

// A pause before retrying a cluster that is mid-failover or mid-migration:
// 10, 20, 40 ... ms, at most 200.
void backoff(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, 10 << std::min(attempt, 5))));
}

}  // namespace

struct RedisCluster::Segment {
  std::size_t begin = 0, end = 0;  // [begin, end) of the caller's commands
  int slot = -1;                   // -1: keyless
  std::optional<Endpoint> ask;     // set by an ASK redirect: go there, after ASKING
};

RedisCluster::RedisCluster(ClusterOptions opts) : opts_(std::move(opts)) {}

Status RedisCluster::start() {
  std::uint64_t epoch = snapshot().second;
  return refresh(epoch, std::nullopt);
}

std::pair<std::shared_ptr<const SlotMap>, std::uint64_t> RedisCluster::snapshot() const {
  std::lock_guard lock(mu_);
  return {map_, epoch_};
}

std::shared_ptr<const SlotMap> RedisCluster::slot_map() const { return snapshot().first; }

RedirectCounts RedisCluster::counts() const {
  return {moved_.load(),      ask_.load(),         refreshes_.load(), tryagain_.load(),
          clusterdown_.load(), node_errors_.load(), failed_.load()};
}

std::shared_ptr<RedisPool> RedisCluster::pool_for(const Endpoint& node) {
  std::lock_guard lock(mu_);
  auto& pool = pools_[node.text()];
  if (!pool) {
    ConnectOptions o = opts_.node;
    o.host = node.host;
    o.port = node.port;
    o.db = 0;
    pool = std::make_shared<RedisPool>(o);
  }
  return pool;
}

Status RedisCluster::refresh(std::uint64_t seen_epoch, const std::optional<Endpoint>& hint) {
  std::lock_guard serial(refresh_mu_);
  auto [current, epoch] = snapshot();
  if (epoch != seen_epoch) return Ok{};  // another caller refreshed meanwhile
  std::vector<Endpoint> candidates;
  if (hint) candidates.push_back(*hint);
  if (current) {
    candidates.insert(candidates.end(), current->masters.begin(), current->masters.end());
    candidates.insert(candidates.end(), current->replicas.begin(), current->replicas.end());
  }
  for (const auto& [host, port] : opts_.seeds) candidates.push_back({host, port});
  Error last = make_error(Errc::unavailable, "redis cluster: no node to ask for the slot map");
  std::vector<std::string> asked;
  for (const auto& node : candidates) {
    if (std::find(asked.begin(), asked.end(), node.text()) != asked.end()) continue;
    asked.push_back(node.text());
    auto r = pool_for(node)->run([](RedisConn& c) { return c.command({"CLUSTER", "SLOTS"}); });
    if (!r) {
      last = r.error();
      continue;
    }
    auto map = parse_cluster_slots(r->get(), node);
    if (!map) {
      last = map.error();
      continue;
    }
    if (map->masters.empty()) {
      last = make_error(Errc::unavailable, "redis cluster: " + node.text() + " knows no master with slots");
      continue;
    }
    std::lock_guard lock(mu_);
    map_ = std::make_shared<const SlotMap>(std::move(*map));
    epoch_++;
    refreshes_++;
    return Ok{};
  }
  return last;
}

Result<Reply> RedisCluster::command(const Args& args) {
  auto r = pipeline({args});
  if (!r) return r.error();
  return std::move(r->front());
}

Result<std::vector<Reply>> RedisCluster::pipeline(const std::vector<Args>& cmds) {
  // Split into segments: single commands, and MULTI ... EXEC blocks.
  std::vector<Segment> segs;
  for (std::size_t i = 0; i < cmds.size();) {
    Segment s;
    s.begin = i;
    s.end = i + 1;
    if (is_multi(cmds[i])) {
      while (s.end < cmds.size() && !ends_multi(cmds[s.end - 1])) s.end++;
    }
    while (s.end < cmds.size() && is_wait(cmds[s.end])) s.end++;
    for (std::size_t j = s.begin; j < s.end && s.slot < 0; ++j) {
      if (auto key = first_key(cmds[j])) s.slot = key_slot(*key);
    }
    segs.push_back(std::move(s));
    i = segs.back().end;
  }
  std::vector<Reply> out(cmds.size());
  std::vector<std::size_t> pending(segs.size());
  for (std::size_t i = 0; i < segs.size(); ++i) pending[i] = i;
  Error last = make_error(Errc::unavailable, "redis cluster: no slot map");

  // Retrying stops once max_attempts rounds have been spent or once a round
  // would start later than one connect plus one operation timeout after the
  // call began, whichever comes first: a black-holed master must not cost a
  // caller many timeouts. A round whose only retries are for a passing
  // state (ASK, TRYAGAIN, CLUSTERDOWN) spends nothing: an entry whose keys
  // are split between the migrating and the importing node for the length
  // of a MIGRATE batch ping-pongs ASK -> TRYAGAIN until its last key has
  // moved, and a cluster mid-failover answers CLUSTERDOWN for a second or
  // more; giving up after a fixed number of ~10-200 ms rounds would turn
  // either into misses. Those rounds are bounded by the deadline (and
  // k_max_rounds) alone.
  constexpr int k_max_rounds = 64;
  const auto deadline = std::chrono::steady_clock::now() + opts_.node.connect_timeout + opts_.node.op_timeout;
  for (int attempt = 0, spent = 0; spent < opts_.max_attempts && attempt < k_max_rounds && !pending.empty();
       ++attempt) {
    if (attempt > 0 && std::chrono::steady_clock::now() > deadline) break;
    auto [map, epoch] = snapshot();
    if (!map) break;
    // Group the pending segments by the node they go to, keeping their order.
    std::vector<std::pair<Endpoint, std::vector<std::size_t>>> groups;
    std::vector<std::size_t> retry;
    bool stale = false, pause = false, passing_only = true;
    std::optional<Endpoint> hint;
    for (std::size_t si : pending) {
      const Segment& s = segs[si];
      const Endpoint* to = nullptr;
      if (s.ask) to = &*s.ask;
      else if (s.slot >= 0) to = map->master_of(s.slot);
      else to = &map->masters[static_cast<std::size_t>(attempt) % map->masters.size()];
      if (to == nullptr) {
        last = make_error(Errc::unavailable, "redis cluster: no master serves slot " + std::to_string(s.slot));
        retry.push_back(si);
        stale = pause = true;
        passing_only = false;
        continue;
      }
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first.text() == to->text(); });
      if (g == groups.end()) {
        groups.push_back({*to, {}});
        g = groups.end() - 1;
      }
      g->second.push_back(si);
    }
    for (auto& [node, members] : groups) {
      std::vector<Args> batch;
      for (std::size_t si : members) {
        if (segs[si].ask) batch.push_back({"ASKING"});
        for (std::size_t j = segs[si].begin; j < segs[si].end; ++j) batch.push_back(cmds[j]);
      }
      auto r = pool_for(node)->run([&](RedisConn& c) { return c.pipeline_raw(batch); });
      if (!r) {
        node_errors_++;
        if (r.error().code == Errc::timeout) {
          failed_++;
          return r.error();
        }
        last = r.error();  // a dead or unreachable node: ask the others for the map, retry
        for (std::size_t si : members) {
          segs[si].ask.reset();
          retry.push_back(si);
        }
        stale = pause = true;
        passing_only = false;
        continue;
      }
      std::size_t at = 0;
      for (std::size_t si : members) {
        Segment& s = segs[si];
        if (s.ask) at++;  // ASKING's +OK
        bool redo = false;
        // Where the retry goes after ASKING: an ASK's target; after a
        // TRYAGAIN from a node this segment was ASKed to, that node again
        // (the slot's keys only move towards it; the migrating node would
        // only answer ASK once more).
        std::optional<Endpoint> ask_to;
        for (std::size_t j = s.begin; j < s.end; ++j, ++at) {
          out[j] = std::move((*r)[at]);
          std::string_view err = error_text(out[j]);
          if (err.empty() || redo) continue;
          if (auto moved = redirect_target(err, "MOVED")) {
            if (moved->host.empty()) moved->host = node.host;
            moved_++;
            hint = *moved;
            stale = redo = true;
            passing_only = false;
          } else if (auto ask = redirect_target(err, "ASK")) {
            if (ask->host.empty()) ask->host = node.host;
            ask_++;
            ask_to = *ask;
            redo = true;
          } else if (starts(err, "TRYAGAIN")) {
            tryagain_++;
            ask_to = s.ask;
            pause = redo = true;
          } else if (starts(err, "CLUSTERDOWN")) {
            // A passing state too: mid-failover, or a node that has not yet
            // seen a restarted peer come back (it flags a new master's slots
            // as served by a failed node for two node timeouts). The node
            // answered, so the deadline bounds the wait, not the 5 rounds.
            clusterdown_++;
            pause = redo = true;
          }
          if (redo) last = *reply_error(out[j].get());
        }
        if (!redo) continue;
        s.ask = ask_to;
        retry.push_back(si);
      }
    }
    pending = std::move(retry);
    if (pending.empty()) break;
    if (!passing_only) spent++;
    if (pause) backoff(attempt);
    if (stale) {
      if (auto s = refresh(epoch, hint); !s) last = s.error();
    }
  }
  if (!pending.empty()) {
    failed_++;
    return last;
  }
  for (const auto& r : out) {
    if (auto e = reply_error(r.get())) return *e;
  }
  return out;
}

Result<std::vector<std::string>> RedisCluster::scan(std::string_view pattern) {
  Error last = make_error(Errc::unavailable, "redis cluster: no slot map");
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto [map, epoch] = snapshot();
    if (!map) break;
    std::vector<std::string> keys;
    bool failed = false;
    for (const Endpoint& m : map->masters) {
      auto r = pool_for(m)->run([&](RedisConn& c) { return scan_node(c, pattern); });
      if (!r) {
        last = r.error();
        failed = true;
        break;
      }
      keys.insert(keys.end(), std::make_move_iterator(r->begin()), std::make_move_iterator(r->end()));
    }
    if (!failed) return keys;
    if (last.code == Errc::timeout) break;
    if (auto s = refresh(epoch, std::nullopt); !s) last = s.error();
  }
  return last;
}

std::vector<Endpoint> RedisCluster::endpoints() {
  // Seeds first, in the URL's order: an operator (or a test) decides where
  // each replica subscribes; then the nodes the map knows.
  std::vector<Endpoint> out;
  for (const auto& [host, port] : opts_.seeds) out.push_back({host, port});
  if (auto map = slot_map()) {
    out.insert(out.end(), map->masters.begin(), map->masters.end());
    out.insert(out.end(), map->replicas.begin(), map->replicas.end());
  }
  return out;
}

}  // namespace kcache::redis
