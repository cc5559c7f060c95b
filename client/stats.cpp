#include "client/stats.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace kcache::client {

ClientStats StatsCounters::snapshot(std::string breaker) const {
  ClientStats s;
  s.node_hits = node_hits.load();
  s.server_hits = server_hits.load();
  s.misses = misses.load();
  s.lease_waits = lease_waits.load();
  s.lease_busy = lease_busy.load();
  s.compiles = compiles.load();
  s.local_compiles = local_compiles.load();
  s.compile_failures = compile_failures.load();
  s.compile_seconds_spent = static_cast<double>(compile_us_spent.load()) / 1e6;
  s.compile_seconds_saved = static_cast<double>(compile_us_saved.load()) / 1e6;
  s.bytes_fetched = bytes_fetched.load();
  s.bytes_uploaded = bytes_uploaded.load();
  s.uploads = uploads.load();
  s.upload_failures = upload_failures.load();
  s.server_errors = server_errors.load();
  s.refused = refused.load();
  s.breaker = std::move(breaker);
  return s;
}

std::string stats_json(const ClientStats& s) {
  nlohmann::json j = {
      {"hits", {{"node", s.node_hits}, {"server", s.server_hits}}},
      {"node_hits", s.node_hits},
      {"server_hits", s.server_hits},
      {"misses", s.misses},
      {"lease_waits", s.lease_waits},
      {"lease_busy", s.lease_busy},
      {"compiles", s.compiles},
      {"local_compiles", s.local_compiles},
      {"compile_failures", s.compile_failures},
      {"compile_seconds_spent", s.compile_seconds_spent},
      {"compile_seconds_saved", s.compile_seconds_saved},
      {"bytes_fetched", s.bytes_fetched},
      {"bytes_uploaded", s.bytes_uploaded},
      {"uploads", s.uploads},
      {"upload_failures", s.upload_failures},
      {"server_errors", s.server_errors},
      {"refused", s.refused},
      {"breaker", s.breaker},
  };
  return j.dump();
}

std::string stats_line(const ClientStats& s) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "stats: hits node=%llu server=%llu misses=%llu lease_waits=%llu compiles=%llu (local %llu, "
      "failed %llu) compile_s spent=%.2f saved=%.2f bytes in=%llu out=%llu server_errors=%llu "
      "refused=%llu breaker=%s",
      static_cast<unsigned long long>(s.node_hits), static_cast<unsigned long long>(s.server_hits),
      static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.lease_waits),
      static_cast<unsigned long long>(s.compiles),
      static_cast<unsigned long long>(s.local_compiles),
      static_cast<unsigned long long>(s.compile_failures), s.compile_seconds_spent,
      s.compile_seconds_saved, static_cast<unsigned long long>(s.bytes_fetched),
      static_cast<unsigned long long>(s.bytes_uploaded),
      static_cast<unsigned long long>(s.server_errors), static_cast<unsigned long long>(s.refused),
      s.breaker.c_str());
  return buf;
}

}  // namespace kcache::client
