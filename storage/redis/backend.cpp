#include "storage/redis/backend.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <span>

#include "common/hex.hpp"
#include "common/sha256.hpp"
#include "redis/cluster.hpp"
#include "redis/link.hpp"
#include "redis/pool.hpp"
#include "redis/reply.hpp"
#include "storage/capabilities.hpp"
#include "storage/disk/files.hpp"
#include "storage/entry_query.hpp"
#include "storage/redis/entry_reply.hpp"
#include "storage/redis/index.hpp"
#include "storage/redis/key_scheme.hpp"
#include "storage/redis/range_read.hpp"
#include "storage/redis/scripts.hpp"

namespace kcache::storage {
namespace {

using Bytes = std::vector<std::uint8_t>;
using redis::Args;
using redis::Reply;

using redisdb::exec_of_meta_read;
using redis::exec_reply;
using redis::num;
using redisdb::parse_entry;
using redis::str;

class RedisBackend : public Backend {
 public:
  RedisBackend(RedisOptions opts, std::shared_ptr<redis::RedisLink> link, std::string name)
      : opts_(std::move(opts)), keys_(opts_.key_prefix), link_(std::move(link)), name_(std::move(name)) {}

  Result<Bytes> get(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    return read(key, /*touch=*/true, nullptr);
  }

  Result<Entry> head(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    std::string mk = keys_.meta(key);
    Args args = {"HMGET", mk};
    for (const char* f : redisdb::k_meta_fields) args.push_back(f);
    auto r = link_->command(args);
    if (!r) return r.error();
    if ((*r)->element[0]->type == REDIS_REPLY_NIL) return make_error(Errc::not_found, "no such object");
    return parse_entry(key, r->get(), 0);
  }

  Result<PutOutcome> put(const std::string& key, const Bytes& bytes, const EntryMeta& meta) override {
    return put_span(key, std::span<const std::uint8_t>(bytes), meta);
  }

  // Sent from `bytes` (a spooled upload's mapping) in batches of chunks:
  // no copy of the object, and at most k_write_batch_bytes of it formatted
  // in hiredis's output buffer at a time.
  Result<PutOutcome> put_span(const std::string& key, std::span<const std::uint8_t> bytes,
                              const EntryMeta& meta) override {
    if (auto s = check_key(key); !s) return s.error();
    if (opts_.capacity_bytes != 0 && bytes.size() > opts_.capacity_bytes) {
      return make_error(Errc::full, "object larger than the redis capacity");
    }
    std::string mk = keys_.meta(key);
    auto present = link_->command({"EXISTS", mk});
    if (!present) return present.error();
    if (num(present->get()) == 1) return already_present(key);
    if (opts_.capacity_bytes != 0) {
      if (auto s = make_room(bytes.size()); !s) return s.error();
    }
    std::string token = disk::random_token();
    std::size_t chunks = (bytes.size() + opts_.chunk_bytes - 1) / opts_.chunk_bytes;
    std::string prefix = keys_.tmp_prefix(key, token);
    if (auto s = write_temps(prefix, bytes, chunks); !s) return s.error();
    if (opts_.fault_hook) opts_.fault_hook->before_publish(key);

    std::string now = std::to_string(now_ms());
    std::string n = std::to_string(chunks), size = std::to_string(bytes.size());
    std::string sha = to_hex(sha256(bytes)), cms = std::to_string(meta.compile_ms);
    Args args = {"EVAL", redisdb::k_publish_script, "1", mk, token, n,
                 "size", size, "sha256", sha, "chunks", n, "created_ms", now, "last_access_ms", now,
                 "hits", "0", "label", meta.label, "target", meta.target, "mode", meta.mode,
                 "dtype", meta.dtype, "toolchain", meta.toolchain, "compile_ms", cms};
    // With the durability setting, WAIT follows the publish on its
    // connection (RedisLink keeps a WAIT with the command before it).
    std::vector<Args> cmds = {args};
    const std::string want = std::to_string(opts_.wait_replicas), wait_ms = std::to_string(opts_.wait_timeout.count());
    if (durable()) cmds.push_back({"WAIT", want, wait_ms});
    auto r = link_->pipeline(cmds);
    if (!r) return r.error();
    std::int64_t outcome = num((*r)[0].get());
    if (outcome == 0) return already_present(key);
    if (outcome < 0) return make_error(Errc::timeout, "redis: temp chunks expired before publish");
    // Not atomic with the publish (in a Cluster the index is in another
    // slot); an entry missed here is re-indexed by verify().
    auto idx = link_->command({"EVAL", redisdb::k_index_add_script, "4", keys_.lru(), keys_.sizes(), keys_.usage(),
                               keys_.keys(), key, now, size});
    if (!idx) return idx.error();
    // Indexed even when not durable: the entry is on the master and must be
    // counted and evictable; the caller is told it is not safely stored.
    if (durable()) {
      if (auto s = check_acked((*r)[1].get(), key); !s) return s.error();
    }
    return PutOutcome::stored;
  }

  Result<Bytes> read_range(const std::string& key, std::uint64_t offset, std::uint64_t length) override {
    if (auto s = check_key(key); !s) return s.error();
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool replaced = false;
      auto bytes = redisdb::read_range_once(*link_, keys_, key, offset, length, replaced);
      if (!bytes || !replaced) return bytes;
    }
    return make_error(Errc::not_found, "object replaced while being read");
  }

  Status remove(const std::string& key) override {
    if (auto s = check_key(key); !s) return s.error();
    auto size = delete_entry(key, "");
    if (!size) return size.error();
    if (*size < 0) return make_error(Errc::not_found, "no such object");
    return Ok{};
  }

  // One script on the entry's meta hash: no pin lands on an absent entry.
  Status set_pinned(const std::string& key, bool pinned) override {
    if (auto s = check_key(key); !s) return s.error();
    auto r = link_->command({"EVAL", redisdb::k_pin_script, "1", keys_.meta(key), pinned ? "1" : "0"});
    if (!r) return r.error();
    if (num(r->get()) == 0) return make_error(Errc::not_found, "no such object");
    return Ok{};
  }

  // Key order (the default, and what `kcache ls`, stats and transfers page
  // by) reads the keys zset from the cursor on, a batch at a time, until
  // limit + 1 entries match: a page costs what it shows plus what its
  // filters skip, not the whole index. Other orders still read the whole
  // index per page (make_page).
  Result<ListPage> list(const ListQuery& query) override {
    if (query.sort == SortBy::key) return redisdb::page_by_key(*link_, keys_, query);
    auto all = redisdb::all_entries(*link_, keys_);
    if (!all) return all.error();
    return make_page(std::move(*all), query);
  }

  Status backfill_key_order() { return redisdb::backfill_key_order(*link_, keys_); }

  Result<Usage> usage() override {
    auto r = link_->command({"HMGET", keys_.usage(), "entries", "bytes"});
    if (!r) return r.error();
    return Usage{static_cast<std::uint64_t>(num((*r)->element[0])), static_cast<std::uint64_t>(num((*r)->element[1])),
                 opts_.capacity_bytes};
  }

  Result<EvictReport> evict(const EvictPolicy& policy) override {
    auto all = redisdb::all_entries(*link_, keys_);
    if (!all) return all.error();
    auto u = usage();
    if (!u) return u.error();
    auto report = select_for_eviction(std::move(*all), policy, u->bytes, u->entries, now_ms());
    if (!report || policy.dry_run) return report;
    EvictReport done;
    for (const auto& key : report->keys) {
      auto size = delete_entry(key, "", /*spare_pinned=*/true);
      if (!size) return size.error();
      if (*size < 0) continue;  // removed meanwhile, or pinned since
      done.keys.push_back(key);
      done.bytes += static_cast<std::uint64_t>(*size);
    }
    return done;
  }

  Result<VerifyReport> verify(const Verifier& verifier, bool remove) override {
    if (auto s = reindex(); !s) return s.error();
    auto all = redisdb::all_entries(*link_, keys_);
    if (!all) return all.error();
    VerifyReport report;
    for (const Entry& e : *all) {
      auto bytes = read(e.key, /*touch=*/false, &verifier, remove);
      if (!bytes && bytes.error().code != Errc::corrupt) {
        if (bytes.error().code == Errc::not_found) continue;
        return bytes.error();
      }
      report.checked++;
      if (bytes) continue;
      report.corrupt.push_back(e.key);
      if (remove) report.removed++;
    }
    return report;
  }

  Status ping() override {
    auto r = link_->command({"PING"});
    if (!r) return r.error();
    return Ok{};
  }

  std::string name() const override { return name_; }

 private:
  bool durable() const { return opts_.wait_replicas > 0; }

  // Errc::not_durable unless WAIT's reply counts wait_replicas replicas.
  Status check_acked(const redisReply* wait_reply, const std::string& key) const {
    std::int64_t acked = num(wait_reply);
    if (acked >= opts_.wait_replicas) return Ok{};
    return make_error(Errc::not_durable, "redis: object " + key + " written to the master but " +
                                             std::to_string(acked) + " of " + std::to_string(opts_.wait_replicas) +
                                             " replicas acknowledged it within " +
                                             std::to_string(opts_.wait_timeout.count()) +
                                             " ms (WAIT); not claimed stored, a retry is safe");
  }

  // An entry already there. With the durability setting it is only reported
  // present once replicas have it: an earlier upload that failed its WAIT (or
  // one from another writer) may not have reached them yet. WAIT counts only
  // this connection's own writes, so it first writes a short-lived marker in
  // the entry's slot: the replication stream is ordered, so a replica that
  // has the marker has every earlier write to that master, the entry's too.
  Result<PutOutcome> already_present(const std::string& key) {
    if (!durable()) return PutOutcome::already_present;
    auto r = link_->pipeline({{"SET", keys_.sync(key), "1", "PX", "10000"},
                              {"WAIT", std::to_string(opts_.wait_replicas), std::to_string(opts_.wait_timeout.count())}});
    if (!r) return r.error();
    if (auto s = check_acked((*r)[1].get(), key); !s) return s.error();
    return PutOutcome::already_present;
  }

  // The temp chunks, one pipeline per batch of about k_write_batch_bytes
  // (at least one chunk). What was written before a failure expires with
  // the TTL.
  Status write_temps(const std::string& prefix, std::span<const std::uint8_t> bytes, std::size_t chunks) {
    constexpr std::size_t k_write_batch_bytes = 8 << 20;
    const std::size_t per_batch = std::max<std::size_t>(1, k_write_batch_bytes / opts_.chunk_bytes);
    const std::string ttl = std::to_string(opts_.temp_ttl.count());
    for (std::size_t first = 0; first < chunks; first += per_batch) {
      const std::size_t end = std::min(chunks, first + per_batch);
      std::vector<std::string> names;  // Args are views: the names live here
      for (std::size_t i = first; i < end; ++i) names.push_back(prefix + std::to_string(i));
      std::vector<Args> cmds;
      for (std::size_t i = first; i < end; ++i) {
        std::size_t off = i * opts_.chunk_bytes;
        std::size_t len = std::min(opts_.chunk_bytes, bytes.size() - off);
        std::string_view part(reinterpret_cast<const char*>(bytes.data()) + off, len);
        cmds.push_back({"SET", names[i - first], part, "PX", ttl});
      }
      if (auto r = link_->pipeline(cmds); !r) return r.error();
    }
    return Ok{};
  }

  // Reads meta and chunks and checks them; on a bad object deletes it (if
  // `remove_bad`) and returns Errc::corrupt. Meta and chunk 0 come in one
  // MULTI/EXEC; further chunks in a second one that also re-reads the sha256
  // and created_ms, so an entry replaced in between is retried, never
  // mistaken for corruption.
  Result<Bytes> read(const std::string& key, bool touch, const Verifier* verifier, bool remove_bad = true) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::string why, sha;
      auto bytes = read_once(key, touch && attempt == 0, why, sha);
      if (!bytes) return bytes.error();
      if (why == "replaced") continue;
      if (why.empty() && to_hex(sha256(*bytes)) != sha) why = "SHA-256 differs from its meta";
      if (why.empty() && verifier != nullptr && !(*verifier)(key, *bytes)) why = "rejected by the verifier";
      if (why.empty()) return bytes;
      if (remove_bad) {
        (void)delete_entry(key, sha);  // only the entry we read; a failed delete recurs on the next get
        why += "; entry deleted";
      }
      return make_error(Errc::corrupt, "object " + key + " " + why);
    }
    return make_error(Errc::not_found, "object replaced while being read");
  }

  // One read. Sets `why` to a defect, or "replaced"; `sha` to meta's sha256.
  Result<Bytes> read_once(const std::string& key, bool touch, std::string& why, std::string& sha) {
    std::string mk = keys_.meta(key), now = std::to_string(now_ms());
    std::string prefix = keys_.chunk_prefix(key), c0 = prefix + "0";
    Args hmget = {"HMGET", mk};
    for (const char* f : redisdb::k_meta_fields) hmget.push_back(f);
    std::vector<Args> cmds = {{"MULTI"}, hmget, {"GET", c0}, {"EXEC"}};
    if (touch) {
      cmds.push_back({"EVAL", redisdb::k_touch_script, "1", mk, now});
      cmds.push_back({"ZADD", keys_.lru(), "XX", now, key});  // the index's slot: another node in a Cluster
    }
    auto r = link_->pipeline(cmds);
    if (!r) return r.error();
    auto exec = exec_of_meta_read((*r)[3].get());
    if (!exec) return exec.error();
    const redisReply* tx = *exec;
    const redisReply* m = tx->element[0];
    std::uint64_t size = static_cast<std::uint64_t>(num(m->element[0]));
    std::int64_t chunks = num(m->element[2]);
    std::string created = str(m->element[3]);
    sha = str(m->element[1]);
    Bytes bytes;
    bytes.reserve(size);
    std::vector<const redisReply*> parts;
    if (chunks > 0) parts.push_back(tx->element[1]);
    Result<std::vector<Reply>> rest = std::vector<Reply>{};
    if (chunks > 1) {
      std::vector<std::string> names;
      for (std::int64_t i = 1; i < chunks; ++i) names.push_back(prefix + std::to_string(i));
      Args mget = {"MGET"};
      for (const auto& n : names) mget.push_back(n);
      rest = link_->pipeline({{"MULTI"}, {"HMGET", mk, "sha256", "created_ms"}, mget, {"EXEC"}});
      if (!rest) return rest.error();
      auto exec2 = exec_reply((*rest)[3].get(), 2);
      if (!exec2) return exec2.error();
      const redisReply* tx2 = *exec2;
      if (str(tx2->element[0]->element[0]) != sha || str(tx2->element[0]->element[1]) != created) {
        why = "replaced";
        return bytes;
      }
      for (std::size_t i = 0; i < tx2->element[1]->elements; ++i) parts.push_back(tx2->element[1]->element[i]);
    }
    for (const redisReply* c : parts) {
      if (c->type != REDIS_REPLY_STRING) {
        why = "a chunk is missing (evicted by Redis maxmemory?)";
        return bytes;
      }
      bytes.insert(bytes.end(), c->str, c->str + c->len);
    }
    if (bytes.size() != size) why = "size differs from its meta";
    return bytes;
  }

  // Deletes the entry (if its sha256 is `sha`, or any with ""), then drops it
  // from the index. Returns its size, -1 if there was none, -2 if it was
  // pinned and `spare_pinned` (eviction) spared it: then it stays indexed,
  // so the index update waits for the delete's answer (one more round trip).
  Result<std::int64_t> delete_entry(const std::string& key, const std::string& sha, bool spare_pinned = false) {
    std::string mk = keys_.meta(key);
    Args del = {"EVAL", redisdb::k_delete_script, "1", mk, sha, spare_pinned ? "1" : "0"};
    Args unindex = {"EVAL", redisdb::k_index_remove_script, "4", keys_.lru(), keys_.sizes(), keys_.usage(), keys_.keys(),
                    key};
    if (!spare_pinned) {
      auto r = link_->pipeline({del, unindex});
      if (!r) return r.error();
      return num((*r)[0].get());
    }
    auto r = link_->command(del);
    if (!r) return r.error();
    const std::int64_t size = num(r->get());
    if (size == -2) return size;
    if (auto u = link_->command(unindex); !u) return u.error();
    return size;
  }

  // Adds entries whose publish landed but whose index update did not
  // (SCAN runs on every master of a Cluster).
  Status reindex() {
    auto names = link_->scan(keys_.meta_pattern());
    if (!names) return names.error();
    for (const std::string& mk : *names) {
      std::string hex = keys_.hex_of_meta(mk);
      if (hex.empty()) continue;  // not an entry's meta key
      auto m = link_->command({"HMGET", mk, "size", "last_access_ms"});
      if (!m) return m.error();
      std::string size = str((*m)->element[0]), last = str((*m)->element[1]);
      if (size.empty()) continue;
      auto add = link_->command({"EVAL", redisdb::k_index_add_script, "4", keys_.lru(), keys_.sizes(), keys_.usage(),
                                 keys_.keys(), hex, last.empty() ? "0" : last, size});
      if (!add) return add.error();
    }
    return Ok{};
  }

  // Deletes least recently used unpinned entries until `incoming` more
  // bytes fit. Pinned entries are passed over: they stay at the old end of
  // the LRU order, so the next batch starts after the ones already passed
  // (each costs a script call per make_room that reaches it).
  Status make_room(std::uint64_t incoming) {
    std::int64_t passed = 0;  // pinned entries at the old end of the LRU order
    for (;;) {
      auto u = usage();
      if (!u) return u.error();
      std::uint64_t bytes = u->bytes;
      if (bytes + incoming <= opts_.capacity_bytes) return Ok{};
      auto oldest = link_->command({"ZRANGE", keys_.lru(), std::to_string(passed), std::to_string(passed + 15)});
      if (!oldest) return oldest.error();
      if ((*oldest)->elements == 0) {
        return make_error(Errc::full, passed > 0 ? "redis capacity reached and only pinned entries left to evict"
                                                 : "redis capacity reached");
      }
      for (std::size_t i = 0; i < (*oldest)->elements; ++i) {
        auto d = delete_entry(str((*oldest)->element[i]), "", /*spare_pinned=*/true);
        if (!d) return d.error();
        if (*d == -2) passed++;
        if (*d > 0) bytes -= std::min(bytes, static_cast<std::uint64_t>(*d));
        if (bytes + incoming <= opts_.capacity_bytes) return Ok{};
      }
    }
  }

  const RedisOptions opts_;
  const redisdb::KeyScheme keys_;
  const std::shared_ptr<redis::RedisLink> link_;
  const std::string name_;
};

// The same backend over the Cluster router, which reports its counters.
class RedisClusterBackend final : public RedisBackend, public HasClusterRouter {
 public:
  RedisClusterBackend(RedisOptions opts, std::shared_ptr<redis::RedisCluster> cluster)
      : RedisBackend(std::move(opts), cluster, "redis-cluster"), cluster_(std::move(cluster)) {}

  redis::ClusterCounts cluster_counts() const override { return cluster_->counts(); }

 private:
  const std::shared_ptr<redis::RedisCluster> cluster_;  // the same object as the link
};

}  // namespace

namespace {

Status check_options(const RedisOptions& options) {
  if (auto s = redisdb::check_key_prefix(options.key_prefix); !s) return s.error();
  if (options.pool_size == 0 || options.chunk_bytes == 0) {
    return make_error(Errc::invalid_argument, "redis pool_size and chunk_bytes must be positive");
  }
  if (options.wait_replicas < 0 || (options.wait_replicas > 0 && (options.wait_timeout.count() <= 0 ||
                                                                  options.wait_timeout >= options.op_timeout))) {
    return make_error(Errc::invalid_argument, "redis wait_timeout must be positive and below the operation timeout");
  }
  // hiredis 0.14 writes with write(): without this a reset socket raises SIGPIPE.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  return Ok{};
}

template <typename B>
Result<std::unique_ptr<Backend>> checked(std::unique_ptr<B> backend) {
  if (auto s = backend->ping(); !s) return s.error();
  if (auto s = backend->backfill_key_order(); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace

Result<std::unique_ptr<Backend>> open_redis_backend(const RedisOptions& options) {
  if (auto s = check_options(options); !s) return s.error();
  return checked(std::make_unique<RedisBackend>(options, redis::make_single_link(options), "redis"));
}

Result<std::unique_ptr<Backend>> open_redis_cluster_backend(const RedisClusterOptions& options) {
  if (auto s = check_options(options.node); !s) return s.error();
  if (options.seeds.empty() || options.max_attempts <= 0) {
    return make_error(Errc::invalid_argument, "redis cluster: at least one seed node and one attempt");
  }
  auto cluster = std::make_shared<redis::RedisCluster>(options.router());
  if (auto s = cluster->start(); !s) return s.error();
  return checked(std::make_unique<RedisClusterBackend>(options.node, std::move(cluster)));
}

}  // namespace kcache::storage
