// The in-process lease table and the metrics renderings
// (server/leases/lease_table.hpp, server/metrics.hpp).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "server/leases/lease_table.hpp"
#include "server/metrics.hpp"

namespace kcache::server {
namespace {

const std::string k_key(64, 'a');

TEST(LeaseTable, GrantConflictRenewRelease) {
  auto t = make_in_process_lease_table(60'000);
  auto g = t->acquire(k_key, "me");
  ASSERT_TRUE(g.granted);
  EXPECT_TRUE(std::regex_match(g.token, std::regex("[0-9a-f]{32}")));
  EXPECT_EQ(g.ttl_ms, 60'000u);
  auto g2 = t->acquire(k_key, "you");
  EXPECT_FALSE(g2.granted);
  EXPECT_GT(g2.remaining_ms, 59'000u);

  EXPECT_EQ(t->renew(k_key, g.token).outcome, LeaseOutcome::ok);
  EXPECT_EQ(t->renew(k_key, std::string(32, '0')).outcome, LeaseOutcome::not_holder);
  EXPECT_EQ(t->renew(std::string(64, 'b'), g.token).outcome, LeaseOutcome::no_lease);
  EXPECT_EQ(t->release(k_key, std::string(32, '0')), LeaseOutcome::not_holder);
  EXPECT_EQ(t->release(k_key, g.token), LeaseOutcome::ok);
  EXPECT_EQ(t->release(k_key, g.token), LeaseOutcome::no_lease);
  EXPECT_FALSE(t->live_until(k_key));
  auto c = t->counters();
  EXPECT_EQ(c.granted, 1u);
  EXPECT_EQ(c.renewed, 1u);
  EXPECT_EQ(c.released, 1u);
  EXPECT_EQ(c.active, 0u);
}

TEST(LeaseTable, ExpiresByItselfAndCountsOnce) {
  // A 1 s TTL: live right after acquire even on a stalled machine; then
  // waited out by polling (no fixed sleep to outlast).
  auto t = make_in_process_lease_table(1000);
  auto g = t->acquire(k_key, "dead holder");
  ASSERT_TRUE(g.granted);
  ASSERT_TRUE(t->live_until(k_key));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (t->live_until(k_key) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(t->live_until(k_key));
  EXPECT_EQ(t->renew(k_key, g.token).outcome, LeaseOutcome::no_lease);
  auto g2 = t->acquire(k_key, "next");
  EXPECT_TRUE(g2.granted);
  EXPECT_NE(g2.token, g.token);
  t->sweep();
  EXPECT_EQ(t->counters().expired, 1u);
}

TEST(LeaseTable, OneWinnerUnderContention) {
  auto t = make_in_process_lease_table(60'000);
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&] {
      if (t->acquire(k_key, "x").granted) ++winners;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
  EXPECT_EQ(t->list().size(), 1u);
}

TEST(LeaseTable, TokensAreUnique) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(seen.insert(random_token()).second);
}

TEST(Metrics, PrometheusTextIsWellFormed) {
  Metrics m;
  m.record_request("/v1/artifacts/{key}", "GET", 200, 0.003, 0, 100);
  m.record_request("/v1/artifacts/{key}", "GET", 404, 120.0, 0, 10);
  m.record_request("/v1/artifacts/{key}", "PUT", 201, 0.2, 5000, 50);
  m.storage_error("put");
  m.stored("cpu:\"avx\"", "default", 5000);
  m.hits = 3;
  Gauges g;
  g.entries = 7;
  g.bytes = 1234;
  g.capacity_bytes = 0;
  std::string text = m.render_prometheus(g);
  EXPECT_NE(text.find("kcache_http_requests_total{route=\"/v1/artifacts/{key}\",method=\"GET\",status=\"404\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("kcache_http_request_duration_seconds_bucket{route=\"/v1/artifacts/{key}\",le=\"0.005\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("kcache_http_request_duration_seconds_bucket{route=\"/v1/artifacts/{key}\",le=\"60\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("kcache_http_request_duration_seconds_bucket{route=\"/v1/artifacts/{key}\",le=\"+Inf\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("kcache_http_request_duration_seconds_count{route=\"/v1/artifacts/{key}\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("kcache_stored_by_target_total{target=\"cpu:\\\"avx\\\"\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("kcache_cache_hits_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("kcache_entries 7\n"), std::string::npos);
  EXPECT_NE(text.find("kcache_storage_errors_total{op=\"put\"} 1\n"), std::string::npos);

  // Every sample belongs to a family declared once with HELP and TYPE;
  // counters end in _total.
  std::istringstream lines(text);
  std::string line;
  std::set<std::string> typed;
  std::regex sample(R"(^([a-z_]+)(\{.*\})? [0-9.e+-]+$)");
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      EXPECT_TRUE(typed.insert(name).second) << name;
      if (type == "counter") {
        EXPECT_TRUE(name.size() > 6 && name.substr(name.size() - 6) == "_total") << name;
      }
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    std::smatch mm;
    ASSERT_TRUE(std::regex_match(line, mm, sample)) << line;
    std::string name = mm[1];
    std::string base = std::regex_replace(name, std::regex("_(bucket|sum|count)$"), "");
    EXPECT_TRUE(typed.count(name) || typed.count(base)) << name;
  }
}

// The Redis Cluster router's counts: absent unless storage is a cluster,
// then every series of the fixed label sets, zeros included.
TEST(Metrics, ClusterCountsOnlyWithAClusterAndWithFixedLabels) {
  Metrics m;
  Gauges g;
  EXPECT_EQ(m.render_prometheus(g).find("kcache_redis_cluster_"), std::string::npos);
  redis::ClusterCounts c;
  c.moved = 4;
  c.ask = 0;
  c.refreshes = 2;
  c.node_errors = 3;
  c.failed = 1;
  g.cluster = c;
  std::string text = m.render_prometheus(g);
  for (const char* want : {"kcache_redis_cluster_redirects_total{kind=\"moved\"} 4\n",
                           "kcache_redis_cluster_redirects_total{kind=\"ask\"} 0\n",
                           "kcache_redis_cluster_retries_total{reason=\"tryagain\"} 0\n",
                           "kcache_redis_cluster_retries_total{reason=\"clusterdown\"} 0\n",
                           "kcache_redis_cluster_retries_total{reason=\"node_error\"} 3\n",
                           "kcache_redis_cluster_slot_map_refreshes_total 2\n",
                           "kcache_redis_cluster_failed_calls_total 1\n",
                           "# TYPE kcache_redis_cluster_redirects_total counter\n"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want;
  }
}

TEST(Metrics, Totals) {
  Metrics m;
  m.record_request("/healthz", "GET", 200, 0.001, 10, 20);
  m.record_request("/healthz", "GET", 200, 0.001, 1, 2);
  EXPECT_EQ(m.requests_total(), 2u);
  EXPECT_EQ(m.bytes_in(), 11u);
  EXPECT_EQ(m.bytes_out(), 22u);
  m.storage_error("get");
  m.storage_error("get");
  EXPECT_EQ(m.storage_errors_total(), 2u);
}

}  // namespace
}  // namespace kcache::server
