// Namespaces' stores (open_namespace_backend, check_namespace_name;
// storage/backend.hpp): the names allowed, where each URI puts a
// namespace's store (memory: its own; disk: ROOT/namespaces/<ns>, which the
// store at ROOT never reads, counts, cleans or quarantines; redis: keys
// prefixed kcache:ns:<ns>:), and capacity per store. The conformance suite
// checks that namespace stores never cross on every backend
// (storage_conformance_retention_test.cpp, NamespaceStoresAreSeparate).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "storage/backend.hpp"
#include "storage/disk/sidecar.hpp"
#include "storage_test_util.hpp"

namespace kcache::storage {
namespace {

namespace fs = std::filesystem;
using testing::make_bytes;
using testing::make_key;
using Bytes = std::vector<std::uint8_t>;

const EntryMeta k_meta{"Blk/cpu", "cpu", "default", "f32", "tc", 7};

TEST(NamespaceName, OnlyShortLowercaseNames) {
  for (const std::string& good :
       std::vector<std::string>{"default", "team-a", "a", "0", "9lives", "a_b-c", std::string(63, 'z')}) {
    EXPECT_TRUE(check_namespace_name(good).ok()) << good;
  }
  for (const std::string& bad : std::vector<std::string>{"", "-a", "_a", "Team", "a b", "a/b", "..", "a.b", "a:b", "é",
                                                        std::string(64, 'z'), std::string("a\0b", 3)}) {
    auto s = check_namespace_name(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code, Errc::invalid_argument);
    EXPECT_EQ(open_namespace_backend("memory:", bad, 0).error().code, Errc::invalid_argument) << bad;
  }
}

TEST(NamespaceBackend, UnknownUriIsInvalid) {
  EXPECT_EQ(open_namespace_backend("s3://bucket", "team-a", 0).error().code, Errc::invalid_argument);
  EXPECT_EQ(open_namespace_backend("s3://bucket", "default", 0).error().code, Errc::invalid_argument);
  EXPECT_EQ(open_namespace_backend("disk:", "team-a", 0).error().code, Errc::invalid_argument);
}

TEST(NamespaceBackend, MemoryNamespacesAreFreshStores) {
  auto a = open_namespace_backend("memory:", "team-a", 1000);
  auto a_again = open_namespace_backend("memory:", "team-a", 0);
  ASSERT_TRUE(a.ok() && a_again.ok());
  EXPECT_EQ((*a)->name(), "memory");
  ASSERT_TRUE((*a)->put(make_key("m"), make_bytes(10, 1), k_meta).ok());
  EXPECT_EQ((*a_again)->usage()->entries, 0u) << "each open is a store of its own";
  EXPECT_EQ((*a)->usage()->capacity_bytes, 1000u);
  EXPECT_EQ((*a)->put(make_key("big"), make_bytes(1001, 2), k_meta).error().code, Errc::full);
}

// The default store at ROOT and a namespace's at ROOT/namespaces/<ns>: the
// default never lists, counts, verifies, cleans or quarantines what is
// under namespaces/, across reopens, even files there that would be debris
// in its own layout.
TEST(NamespaceBackend, DiskDefaultStoreIgnoresNamespaces) {
  testing::TempDir dir;
  const std::string root = dir.path() + "/store", uri = "disk:" + root;
  std::string mine = make_key("default-entry"), theirs = make_key("team-entry");
  {
    auto ns = open_namespace_backend(uri, "team-a", 5000);
    ASSERT_TRUE(ns.ok()) << ns.error().message;
    EXPECT_TRUE(fs::is_directory(root + "/namespaces/team-a/objects"));
    EXPECT_EQ((*ns)->usage()->capacity_bytes, 5000u);
    ASSERT_TRUE((*ns)->put(theirs, make_bytes(300, 1), k_meta).ok());
    ASSERT_TRUE((*ns)->set_pinned(theirs, true).ok());
    auto dflt = open_namespace_backend(uri, "default", 0);
    ASSERT_TRUE(dflt.ok()) << dflt.error().message;
    ASSERT_TRUE((*dflt)->put(mine, make_bytes(100, 2), k_meta).ok());
    EXPECT_EQ((*dflt)->list({})->entries.size(), 1u);
    EXPECT_EQ((*dflt)->usage()->bytes, 100u);
    EXPECT_EQ((*ns)->usage()->bytes, 300u);
  }
  // Things that would be debris in the default store's own layout, placed
  // in the namespace's: the default's open must leave them alone.
  const std::string ns_root = root + "/namespaces/team-a";
  std::ofstream(ns_root + "/tmp/" + mine + ".x.obj") << "a put in progress";
  std::ofstream(ns_root + "/objects/" + mine.substr(0, 2) + "/" + mine) << "an object without a sidecar";
  {
    auto dflt = open_namespace_backend(uri, "default", 0);
    ASSERT_TRUE(dflt.ok()) << dflt.error().message;
    EXPECT_EQ((*dflt)->usage()->entries, 1u);
    EXPECT_EQ((*dflt)->head(theirs).error().code, Errc::not_found);
    auto v = (*dflt)->verify([](const std::string&, const Bytes&) { return false; }, /*remove=*/true);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->checked, 1u);
    EXPECT_EQ(v->corrupt, std::vector<std::string>{mine});
    EvictPolicy all;
    all.max_bytes = 0;
    EXPECT_TRUE((*dflt)->evict(all)->keys.empty());
  }
  EXPECT_TRUE(fs::exists(ns_root + "/tmp/" + mine + ".x.obj")) << "the default store cleaned a namespace's tmp/";
  EXPECT_TRUE(fs::exists(ns_root + "/objects/" + mine.substr(0, 2) + "/" + mine)) << "an orphan of the namespace removed";
  EXPECT_TRUE(fs::exists(ns_root + "/objects/" + theirs.substr(0, 2) + "/" + theirs + ".meta"));
  for (const auto& q : fs::directory_iterator(root + "/quarantine")) {
    EXPECT_EQ(q.path().filename().string().rfind(mine, 0), 0u) << q.path() << ": only the default's own entry";
  }
  auto ns = open_namespace_backend(uri, "team-a", 0);
  ASSERT_TRUE(ns.ok()) << ns.error().message;
  auto h = (*ns)->head(theirs);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->pinned) << "the pin is in the namespace's sidecar";
  EXPECT_EQ((*ns)->get(theirs).value(), make_bytes(300, 1));
  EXPECT_EQ((*ns)->usage()->entries, 1u) << "its own open removed its own debris";
  EXPECT_FALSE(fs::exists(ns_root + "/tmp/" + mine + ".x.obj"));
  EXPECT_FALSE(fs::exists(ns_root + "/objects/" + mine.substr(0, 2) + "/" + mine));
}

TEST(NamespaceBackend, RedisNamespacesArePrefixedKeys) {
  testing::RedisServer server;
  auto ns = open_namespace_backend(server.url(), "team-a", 0);
  ASSERT_TRUE(ns.ok()) << ns.error().message;
  auto dflt = open_namespace_backend(server.url(), "default", 0);
  ASSERT_TRUE(dflt.ok()) << dflt.error().message;
  std::string k = make_key("r");
  ASSERT_TRUE((*ns)->put(k, make_bytes(10, 1), k_meta).ok());
  ASSERT_TRUE((*dflt)->put(k, make_bytes(20, 2), k_meta).ok());
  EXPECT_EQ(server.cli("HGET 'kcache:ns:team-a:{" + k + "}:meta' size"), "10\n");
  EXPECT_EQ(server.cli("HGET 'kcache:{" + k + "}:meta' size"), "20\n");
  EXPECT_EQ(server.cli("HGET 'kcache:ns:team-a:{index}:usage' bytes"), "10\n");
  EXPECT_EQ((*ns)->usage()->bytes, 10u);
  EXPECT_EQ((*dflt)->usage()->bytes, 20u);
  auto with_capacity = open_namespace_backend(server.url(), "team-b", 15);
  ASSERT_TRUE(with_capacity.ok());
  EXPECT_EQ((*with_capacity)->usage()->capacity_bytes, 15u);
  EXPECT_EQ((*with_capacity)->put(k, make_bytes(20, 3), k_meta).error().code, Errc::full);
}

// Sidecars from before pins have no "pinned": they read as unpinned, and a
// store of them opens unchanged; a pinned one round-trips; a "pinned" that is
// not a boolean is not a sidecar.
TEST(DiskSidecar, PinnedIsOptionalAndBoolean) {
  std::string key = make_key("sc"), sha = make_key("sha");
  std::string old = R"({"v":1,"key":")" + key + R"(","size":3,"sha256":")" + sha +
                    R"(","created_ms":1,"last_access_ms":2,"hits":3,"label":"L","target":"cpu","mode":"default",)"
                    R"("dtype":"f32","toolchain":"tc","compile_ms":40})";
  auto s = disk::decode_sidecar(old);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s->entry.pinned);
  EXPECT_EQ(s->entry.meta.compile_ms, 40u);
  s->entry.pinned = true;
  auto back = disk::decode_sidecar(disk::encode_sidecar(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->entry.pinned);
  std::string odd = old.substr(0, old.size() - 1) + R"(,"pinned":"yes"})";
  EXPECT_EQ(disk::decode_sidecar(odd).error().code, Errc::corrupt);
}

}  // namespace
}  // namespace kcache::storage
