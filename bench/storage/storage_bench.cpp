// kcache_storage_bench: single-client get/put throughput of each storage
// backend for 1 KB, 100 KB and 4 MB objects, beside raw redis-server
// (redis-benchmark -c 1 -P 1, same sizes, same run) as the reference; and the
// disk index rebuild time for N entries. Driven by bench/storage/run.sh.
//
//   kcache_storage_bench --dir WORKDIR --redis-port PORT [--seconds S] [--rebuild N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/hex.hpp"
#include "common/sha256.hpp"
#include "storage/backend.hpp"
#include "storage/disk/backend.hpp"
#include "storage/disk/layout.hpp"
#include "storage/disk/sidecar.hpp"

using namespace kcache;
using namespace kcache::storage;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string dir = "/tmp/kcache-storage-bench";
  int redis_port = 0;
  double seconds = 1.5;
  int rebuild = 100000;
};

std::string key_of(std::uint64_t i, const std::string& salt) { return to_hex(sha256(salt + std::to_string(i))); }

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Rates {
  double put = 0, get = 0;
};

// Puts distinct keys for `seconds` (bounded to 1 GiB), then gets random ones.
Rates measure(Backend& b, std::size_t size, double seconds, const std::string& salt) {
  std::vector<std::uint8_t> data(size);
  std::mt19937_64 rng(42);
  for (auto& c : data) c = static_cast<std::uint8_t>(rng());
  EntryMeta meta{"Bench/" + std::to_string(size), "cpu", "default", "f32", "bench", 1};
  std::uint64_t n = 0, max_n = std::max<std::uint64_t>(16, (1ull << 30) / size);
  auto start = Clock::now();
  while (n < max_n && secs(Clock::now() - start) < seconds) {
    data[0] = static_cast<std::uint8_t>(n);  // distinct objects
    if (!b.put(key_of(n, salt), data, meta)) {
      std::fprintf(stderr, "put failed\n");
      std::exit(1);
    }
    n++;
  }
  Rates r;
  r.put = static_cast<double>(n) / secs(Clock::now() - start);
  std::uint64_t gets = 0;
  start = Clock::now();
  while (secs(Clock::now() - start) < seconds) {
    auto got = b.get(key_of(rng() % n, salt));
    if (!got || got->size() != size) {
      std::fprintf(stderr, "get failed\n");
      std::exit(1);
    }
    gets++;
  }
  r.get = static_cast<double>(gets) / secs(Clock::now() - start);
  EvictPolicy all;
  all.max_bytes = 0;
  (void)b.evict(all);
  return r;
}

// redis-benchmark's requests/s for SET and GET of `size` bytes.
Rates redis_reference(int port, std::size_t size) {
  std::size_t n = size >= (1u << 20) ? 300 : size >= 100000 ? 5000 : 30000;
  std::string cmd = "redis-benchmark -p " + std::to_string(port) + " -d " + std::to_string(size) +
                    " -t set,get -P 1 -c 1 -n " + std::to_string(n) + " --csv 2>/dev/null";
  Rates r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char line[512];
  while (p && std::fgets(line, sizeof line, p)) {
    std::string s(line);
    auto field = [&] { return std::atof(s.substr(s.find(",\"") + 2).c_str()); };
    if (s.rfind("\"SET\"", 0) == 0) r.put = field();
    if (s.rfind("\"GET\"", 0) == 0) r.get = field();
  }
  if (p) ::pclose(p);
  return r;
}

// Writes n complete entries straight into a disk layout, then times open.
void rebuild_bench(const std::string& root, int n) {
  std::filesystem::remove_all(root);
  disk::Layout layout{root};
  {
    DiskOptions o;
    o.root = root;
    (void)open_disk_backend(o);  // creates the layout
  }
  std::vector<std::uint8_t> data(1024, 7);
  std::string sha = to_hex(sha256(data));
  for (int i = 0; i < n; ++i) {
    disk::Sidecar sc;
    sc.entry.key = key_of(static_cast<std::uint64_t>(i), "rebuild");
    sc.entry.meta = EntryMeta{"Rebuild/blk", "cpu", "default", "f32", "bench", 1};
    sc.entry.size = data.size();
    sc.entry.created_ms = sc.entry.last_access_ms = 1700000000000 + i;
    sc.sha256 = sha;
    std::ofstream(layout.object(sc.entry.key), std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    std::ofstream(layout.sidecar(sc.entry.key)) << disk::encode_sidecar(sc);
  }
  DiskOptions o;
  o.root = root;
  {
    auto start = Clock::now();
    auto b = open_disk_backend(o);
    double took = secs(Clock::now() - start);
    std::printf("\nDisk index rebuild: %d entries in %.2f s (%.0f entries/s), usage reports %llu entries\n", n,
                took, n / took, b ? static_cast<unsigned long long>((*b)->usage()->entries) : 0ull);
  }
  std::filesystem::remove_all(root);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir") a.dir = v;
    else if (k == "--redis-port") a.redis_port = std::atoi(v.c_str());
    else if (k == "--seconds") a.seconds = std::atof(v.c_str());
    else if (k == "--rebuild") a.rebuild = std::atoi(v.c_str());
  }
  std::filesystem::create_directories(a.dir);
  std::vector<std::size_t> sizes = {1024, 100 * 1024, 4 * 1024 * 1024};
  std::map<std::size_t, Rates> ref;
  for (auto size : sizes) ref[size] = redis_reference(a.redis_port, size);
  std::vector<std::string> uris = {"memory:", "disk:" + a.dir + "/store"};
  if (a.redis_port) uris.push_back("redis://127.0.0.1:" + std::to_string(a.redis_port) + "/0");
  std::printf("| backend | size | put/s | get/s | put vs redis SET | get vs redis GET |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
  for (auto size : sizes) {
    std::printf("| raw redis-server (redis-benchmark -c 1 -P 1) | %zu | %.0f | %.0f | 1.00 | 1.00 |\n", size,
                ref[size].put, ref[size].get);
  }
  for (const auto& uri : uris) {
    std::filesystem::remove_all(a.dir + "/store");
    auto b = open_backend(uri, 0);
    if (!b) {
      std::fprintf(stderr, "%s: %s\n", uri.c_str(), b.error().message.c_str());
      return 1;
    }
    for (auto size : sizes) {
      Rates r = measure(**b, size, a.seconds, uri);
      std::printf("| %s | %zu | %.0f | %.0f | %.2f | %.2f |\n", (*b)->name().c_str(), size, r.put, r.get,
                  r.put / ref[size].put, r.get / ref[size].get);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(a.dir + "/store");
  rebuild_bench(a.dir + "/rebuild", a.rebuild);
  return 0;
}
