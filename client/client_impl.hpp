// Client::Impl: the tiers (node, server), verification, compiling and the
// single-flight flow of get_or_compile (docs/client.md). Private to
// client/: only client.cpp includes it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/bundle.hpp"
#include "artifact/cubin_listing.hpp"
#include "client/client.hpp"
#include "client/cuda_target.hpp"
#include "client/lease_renewer.hpp"
#include "client/log.hpp"
#include "client/node_tier.hpp"
#include "client/server_api.hpp"
#include "client/stats.hpp"

namespace kcache {

using client::log;
using client::LogLevel;
using SteadyClock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;

namespace client_detail {

inline std::string short_key(std::string_view key) {
  return std::string(key.substr(0, 12)) + "…";
}

inline double manifest_compile_seconds(const artifact::Bundle& b) {
  const auto& m = b.manifest;
  if (m.is_object() && m.contains("compile_seconds") && m["compile_seconds"].is_number()) {
    double s = m["compile_seconds"].get<double>();
    return s > 0 ? s : 0;
  }
  return 0;
}

}  // namespace client_detail

using client_detail::manifest_compile_seconds;
using client_detail::short_key;

struct Client::Impl {
  ClientConfig cfg;
  std::optional<client::NodeTier> node;
  std::shared_ptr<client::CircuitBreaker> breaker;
  std::unique_ptr<client::ServerApi> server;
  artifact::TrustStore trust;
  std::optional<artifact::SigningKey> signer;
  client::StatsCounters stats;
  std::string miss_log;
  std::mutex tried_mu;
  std::unordered_set<std::string> tried;  // keys asked for without waiting (first_try)

  // ---- verification ----
  artifact::ReadOptions read_options(std::string_view key, bool with_trust) const {
    artifact::ReadOptions o;
    o.expected_key = std::string(key);
    o.decompress = false;  // the trailer covers every byte; sections are checked when restored
    if (with_trust && trust.size() > 0) {
      o.trust = &trust;
      o.require_signature = true;
    }
    return o;
  }
  Result<artifact::Bundle> verify(std::string_view key, std::span<const std::uint8_t> bytes) const {
    auto b = artifact::read_bundle(bytes, read_options(key, /*with_trust=*/true));
    if (!b.ok() || !lists_cubins(b->manifest)) return b;
    // A bundle with cubins must match this process's GPU (docs/artifact.md).
    auto fits = artifact::check_cubins_for_target(b->manifest, {}, gpu_target());
    if (!fits.ok()) return fits.error();
    return b;
  }

  static bool lists_cubins(const nlohmann::json& m) {
    return m.is_object() && m.contains("cubins") && !(m["cubins"].is_array() && m["cubins"].empty());
  }

  // KCACHE_TARGET, else the CUDA driver's device 0, asked once and only when a
  // bundle with cubins arrives (a CPU job never loads the driver); "" when
  // neither is known, and then cubins are not checked here (the compile layer
  // still checks against its key's target).
  const std::string& gpu_target() const {
    std::call_once(gpu_target_once, [this] {
      auto t = resolve_cuda_target(cfg.target);
      if (t.ok()) {
        gpu_target_value = *t;
      } else {
        log(LogLevel::info, "cubins not checked by the client: " + t.error().message);
      }
    });
    return gpu_target_value;
  }
  mutable std::once_flag gpu_target_once;
  mutable std::string gpu_target_value;

  void count_hit(std::atomic<std::uint64_t>& counter, const artifact::Bundle& b) {
    counter.fetch_add(1);
    stats.compile_us_saved.fetch_add(static_cast<std::uint64_t>(manifest_compile_seconds(b) * 1e6));
  }

  // ---- node tier ----
  std::optional<Bytes> node_lookup(std::string_view key) {
    if (!node) return std::nullopt;
    auto bytes = node->read(key);
    if (!bytes) return std::nullopt;
    auto b = verify(key, *bytes);
    if (!b.ok()) {
      stats.refused.fetch_add(1);
      log(LogLevel::warn, "node tier object " + short_key(key) + " refused (" +
                              errc_name(b.error().code) + ": " + b.error().message + "); deleted");
      node->remove(key);
      return std::nullopt;
    }
    count_hit(stats.node_hits, *b);
    return bytes;
  }

  // First writer wins, but not a corrupt first writer: an object already
  // present is verified, and one that fails is replaced by these bytes.
  void node_publish(std::string_view key, std::span<const std::uint8_t> bytes) {
    if (!node) return;
    auto r = node->publish(key, bytes);
    if (!r.ok()) {
      log(LogLevel::warn, "node tier publish failed: " + r.error().message);
      return;
    }
    if (*r) return;
    auto existing = node->read(key);
    if (!existing || verify(key, *existing).ok()) return;
    stats.refused.fetch_add(1);
    log(LogLevel::warn, "node tier object " + short_key(key) + " was corrupt; replaced");
    node->remove(key);
    r = node->publish(key, bytes);
    if (!r.ok()) log(LogLevel::warn, "node tier publish failed: " + r.error().message);
  }

  // ---- server ----
  enum class Fetch { hit, absent, refused, failed };
  Fetch server_fetch(std::string_view key, int wait_ms, Bytes& out) {
    auto r = server->get(key, wait_ms);
    if (!r.ok()) {
      server_failed("GET", r.error());
      return Fetch::failed;
    }
    if (!r->has_value()) return Fetch::absent;
    Bytes bytes = std::move(**r);
    stats.bytes_fetched.fetch_add(bytes.size());
    auto b = verify(key, bytes);
    if (!b.ok()) {
      stats.refused.fetch_add(1);
      log(LogLevel::warn, "server artifact " + short_key(key) + " refused (" +
                              errc_name(b.error().code) + ": " + b.error().message + ")");
      return Fetch::refused;
    }
    count_hit(stats.server_hits, *b);
    node_publish(key, bytes);
    out = std::move(bytes);
    return Fetch::hit;
  }

  void server_failed(const char* what, const Error& e) {
    stats.server_errors.fetch_add(1);
    log(LogLevel::warn,
        std::string("server ") + what + " failed, continuing without it: " + e.message);
  }

  // ---- compiling ----
  // Runs the callback, checks what it returned is a bundle for `key`, and
  // signs it when a signing key is configured and it is unsigned.
  Result<Bytes> run_compile(std::string_view key, const CompileFn& compile) {
    stats.compiles.fetch_add(1);
    auto t0 = SteadyClock::now();
    Result<Bytes> out = make_error(Errc::internal, "compile callback did not run");
    try {
      out = compile ? compile() : make_error(Errc::invalid_argument, "no compile callback");
    } catch (const std::exception& e) {
      out = make_error(Errc::internal, std::string("compile callback threw: ") + e.what());
    } catch (...) {
      out = make_error(Errc::internal, "compile callback threw");
    }
    auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - t0).count();
    stats.compile_us_spent.fetch_add(static_cast<std::uint64_t>(us));
    if (!out.ok()) {
      stats.compile_failures.fetch_add(1);
      return out;
    }
    auto checked = artifact::read_bundle(*out, read_options(key, /*with_trust=*/false));
    if (!checked.ok()) {
      stats.compile_failures.fetch_add(1);
      return make_error(checked.error().code,
                        "compile callback returned an unusable bundle: " + checked.error().message);
    }
    if (signer && !checked->signer_key_id) {
      auto signed_bytes = sign(key, *out);
      if (!signed_bytes.ok()) {
        log(LogLevel::warn,
            "signing failed, keeping the unsigned bundle: " + signed_bytes.error().message);
      } else {
        return signed_bytes;
      }
    }
    return out;
  }

  Result<Bytes> sign(std::string_view key, std::span<const std::uint8_t> bytes) const {
    artifact::ReadOptions o;
    o.expected_key = std::string(key);
    auto full = artifact::read_bundle(bytes, o);
    if (!full.ok()) return full.error();
    return artifact::write_bundle(full->manifest, full->sections, &*signer);
  }

  // True when a bundle we made passes our own read policy (a reader here
  // would accept it): only those go to the node tier.
  Result<Fetched> compile_locally(std::string_view key, const CompileFn& compile, Source source) {
    if (source == Source::local) stats.local_compiles.fetch_add(1);
    auto bytes = run_compile(key, compile);
    if (!bytes.ok()) return bytes.error();
    if (auto fits = verify(key, *bytes); fits.ok()) {
      node_publish(key, *bytes);
    } else {
      log(LogLevel::warn, "compiled bundle for " + short_key(key) + " is not kept on this node: this " +
                              "client would refuse it (" + errc_name(fits.error().code) + ": " +
                              fits.error().message + ")");
    }
    return Fetched{std::move(bytes).value(), source};
  }

  Result<Fetched> compile_with_lease(std::string_view key, const CompileFn& compile,
                                     const client::LeaseAnswer& lease) {
    Result<Bytes> bytes = make_error(Errc::internal, "unset");
    {
      client::LeaseRenewer renewer(*server, std::string(key), lease.token, lease.ttl_ms);
      bytes = run_compile(key, compile);
    }
    if (!bytes.ok()) {
      // Waiters stop waiting at once and one of them takes the lease.
      auto rel = server->release(key, lease.token);
      if (!rel.ok()) server_failed("DELETE lease", rel.error());
      return bytes.error();
    }
    Source source = Source::compiled;
    if (auto fits = verify(key, *bytes); !fits.ok()) {
      log(LogLevel::warn, "compiled bundle for " + short_key(key) + " is not shared: this client " +
                              "would refuse it (" + errc_name(fits.error().code) + ": " +
                              fits.error().message + ")");
      (void)server->release(key, lease.token);
      stats.local_compiles.fetch_add(1);
      return Fetched{std::move(bytes).value(), Source::local};
    }
    auto put = server->put(key, *bytes, lease.token);
    if (put.ok()) {
      stats.uploads.fetch_add(1);
      stats.bytes_uploaded.fetch_add(bytes->size());
    } else {
      stats.upload_failures.fetch_add(1);
      server_failed("PUT", put.error());
      (void)server->release(key, lease.token);
      source = Source::local;
    }
    node_publish(key, *bytes);
    return Fetched{std::move(bytes).value(), source};
  }

  static Result<std::optional<Fetched>> some(Result<Fetched> r) {
    if (!r.ok()) return r.error();
    return std::optional<Fetched>(std::move(r).value());
  }

  // True the first time `key` is asked for without waiting: a caller that
  // tries a busy region again and again counts one miss, not one per try.
  bool first_try(std::string_view key) {
    std::lock_guard<std::mutex> g(tried_mu);
    return tried.emplace(key).second;
  }

  // The server half of get_or_compile. REQUIRES: server, the key missed in
  // the node tier. With `wait` false, a lease held by another process ends the call:
  // nullopt (try_get_or_compile), nothing compiled and nothing waited for.
  Result<std::optional<Fetched>> single_flight(std::string_view key, const CompileFn& compile,
                                               SteadyClock::time_point deadline,
                                               std::string_view explanation, bool wait = true) {
    int exists_bounces = 0;
    bool counted_wait = false;
    bool counted_miss = false;
    for (;;) {
      Bytes bytes;
      auto fetched = server_fetch(key, 0, bytes);
      if (fetched == Fetch::hit) return some(Fetched{std::move(bytes), Source::server});
      if (!counted_miss) {
        if (wait || first_try(key)) note_miss(key, explanation);
        counted_miss = true;
      }
      // refused: a bad artifact is stored under the key and cannot be replaced.
      if (fetched != Fetch::absent) return some(compile_locally(key, compile, Source::local));
      if (cfg.read_only) return some(compile_locally(key, compile, Source::local));
      auto lease = server->acquire(key);
      if (!lease.ok()) {
        server_failed("POST lease", lease.error());
        return some(compile_locally(key, compile, Source::local));
      }
      if (lease->kind == client::LeaseAnswer::Kind::granted)
        return some(compile_with_lease(key, compile, *lease));
      if (lease->kind == client::LeaseAnswer::Kind::exists) {
        // Stored between our GET and POST; more than a few bounces means the
        // server contradicts itself.
        if (++exists_bounces > 3) return some(compile_locally(key, compile, Source::local));
        continue;
      }
      // Held by another process: long-poll until it lands, the lease ends,
      // or our wait budget runs out (or, not waiting, say so at once).
      if (!wait) {
        stats.lease_busy.fetch_add(1);
        return std::optional<Fetched>();
      }
      if (!counted_wait) {
        stats.lease_waits.fetch_add(1);
        counted_wait = true;
      }
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now())
              .count();
      if (left <= 0) {
        log(LogLevel::warn, "waited the whole budget for another compile of " + short_key(key) +
                                "; compiling here");
        return some(compile_locally(key, compile, Source::local));
      }
      int wait_ms = static_cast<int>(std::min<long long>(left, cfg.long_poll_ms));
      switch (server_fetch(key, std::max(wait_ms, 1), bytes)) {
        case Fetch::hit: return some(Fetched{std::move(bytes), Source::server});
        case Fetch::refused:
        case Fetch::failed: return some(compile_locally(key, compile, Source::local));
        case Fetch::absent: break;  // released, expired, or poll ended: ask again
      }
    }
  }

  // A lookup that found nothing usable in any tier: counted once per call and
  // written to the miss log with the key's explanation.
  void note_miss(std::string_view key, std::string_view explanation) {
    stats.misses.fetch_add(1);
    if (log_enabled(LogLevel::debug)) log(LogLevel::debug, "miss " + std::string(key));
    append_miss_log(miss_record(key, explanation));
  }

  // A stored entry this process found but did not use, because the caller's
  // own checks of it failed (a precompiled region whose block differs from
  // the one compiled): a miss-log record with the checks that failed, which
  // `kcache explain --file misses.jsonl` shows.
  void note_check_failure(std::string_view key, std::string_view explanation,
                          const std::vector<std::string>& failures) {
    auto line = miss_record(key, explanation);
    line["kind"] = "check_failure";
    line["check_failures"] = failures;
    append_miss_log(line);
  }

  static nlohmann::json miss_record(std::string_view key, std::string_view explanation) {
    nlohmann::json line = {
        {"ts_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()},
        {"key", std::string(key)},
        {"pid", ::getpid()},
    };
    auto ex = nlohmann::json::parse(explanation.begin(), explanation.end(), nullptr, false);
    line["explanation"] = explanation.empty() || ex.is_discarded() ? nlohmann::json() : ex;
    return line;
  }

  void append_miss_log(const nlohmann::json& line) {
    if (miss_log.empty()) return;
    std::string text = line.dump() + "\n";
    // O_APPEND and one write: lines from concurrent ranks never interleave.
    int fd = ::open(miss_log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    [[maybe_unused]] auto n = ::write(fd, text.data(), text.size());
    ::close(fd);
  }

  Result<Fetched> get_or_compile(std::string_view key, const CompileFn& compile,
                                 std::string_view explanation) {
    auto r = fetch_or_compile(key, compile, explanation, /*wait=*/true);
    if (!r.ok()) return r.error();
    if (!*r) return make_error(Errc::internal, "single flight ended without a bundle");
    return std::move(**r);
  }

  // get_or_compile, and with `wait` false its non-waiting form: nullopt when
  // another process holds the region's lease (the server's, or on a server-
  // less node the node lock), so that the caller can take other work.
  Result<std::optional<Fetched>> fetch_or_compile(std::string_view key, const CompileFn& compile,
                                                  std::string_view explanation, bool wait) {
    if (!artifact::is_cache_key_hex(key)) {
      return make_error(Errc::invalid_argument, "not a cache key (64 lowercase hex characters)");
    }
    if (cfg.disabled) {
      auto bytes = run_compile(key, compile);
      if (!bytes.ok()) return bytes.error();
      return std::optional<Fetched>(Fetched{std::move(bytes).value(), Source::local});
    }
    auto deadline = SteadyClock::now() + std::chrono::milliseconds(cfg.wait_budget_ms);
    if (auto hit = node_lookup(key)) return std::optional<Fetched>(Fetched{std::move(*hit), Source::node});
    // One process per node goes further; its siblings wait here and then find
    // the bundle in the node tier. Without the lock (unwritable directory,
    // budget spent) we simply go on: at worst a duplicate compile. Not
    // waiting, a sibling holding the lock means the region is in hand.
    std::optional<client::NodeLock> lock;
    if (node) {
      auto t0 = SteadyClock::now();
      lock = node->lock(key, wait ? deadline : t0);
      if (!lock && !wait) {
        if (auto hit = node_lookup(key)) return std::optional<Fetched>(Fetched{std::move(*hit), Source::node});
        stats.lease_busy.fetch_add(1);
        return std::optional<Fetched>();
      }
      if (SteadyClock::now() - t0 > std::chrono::milliseconds(5)) {
        stats.lease_waits.fetch_add(1);
        if (auto hit = node_lookup(key)) return std::optional<Fetched>(Fetched{std::move(*hit), Source::node});
      }
    }
    if (!server) {
      note_miss(key, explanation);
      auto local = compile_locally(key, compile, Source::compiled);
      if (!local.ok()) return local.error();
      return std::optional<Fetched>(std::move(local).value());
    }
    return single_flight(key, compile, deadline, explanation, wait);
  }

  // get(), saying which tier answered.
  Result<std::optional<Fetched>> lookup(std::string_view key) {
    if (!artifact::is_cache_key_hex(key)) {
      return make_error(Errc::invalid_argument, "not a cache key (64 lowercase hex characters)");
    }
    if (cfg.disabled) return std::optional<Fetched>();
    if (auto hit = node_lookup(key)) return std::optional<Fetched>(Fetched{std::move(*hit), Source::node});
    if (server) {
      Bytes bytes;
      if (server_fetch(key, 0, bytes) == Fetch::hit)
        return std::optional<Fetched>(Fetched{std::move(bytes), Source::server});
    }
    stats.misses.fetch_add(1);
    return std::optional<Fetched>();
  }

  Result<bool> put(std::string_view key, std::span<const std::uint8_t> data) {
    if (!artifact::is_cache_key_hex(key)) {
      return make_error(Errc::invalid_argument, "not a cache key (64 lowercase hex characters)");
    }
    auto checked = artifact::read_bundle(data, read_options(key, /*with_trust=*/false));
    if (!checked.ok()) return checked.error();
    if (cfg.disabled) return false;
    Bytes bytes(data.begin(), data.end());
    if (signer && !checked->signer_key_id) {
      auto s = sign(key, bytes);
      if (!s.ok()) return s.error();
      bytes = std::move(s).value();
    }
    // A bundle this client would refuse on get (untrusted signer, cubins for
    // another arch) is stored nowhere: callers must not be told it is.
    if (auto fits = verify(key, bytes); !fits.ok()) return fits.error();
    node_publish(key, bytes);
    if (!server || cfg.read_only) return !server;
    auto r = server->put(key, bytes, "");
    if (!r.ok()) {
      stats.upload_failures.fetch_add(1);
      server_failed("PUT", r.error());
      return false;
    }
    stats.uploads.fetch_add(1);
    stats.bytes_uploaded.fetch_add(bytes.size());
    return true;
  }

  ClientStats snapshot() const {
    std::string b = breaker ? client::CircuitBreaker::state_name(breaker->state()) : "closed";
    return stats.snapshot(b);
  }
};

}  // namespace kcache
