// load_tls_files (common/tls_files.hpp), the one loader the server, the
// client library and the CLI use: a good chain and key load; a key of
// another certificate, half a pair, a missing or malformed file are refused
// with the option's name and the path, and never the key's bytes.
#include <gtest/gtest.h>

#include <openssl/ssl.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/tls_files.hpp"

namespace kcache {
namespace {

const TlsFileNames k_names{"--ca", "--cert", "--key"};

class TlsFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs each test of the suite as a process of its own, in parallel.
    dir_ = ::testing::TempDir() + "/kcache-tls-files-" + std::to_string(::getpid());
    const std::string cmd = "rm -rf " + dir_ + " && mkdir -p " + dir_ + " && cd " + dir_ +
                            " && for n in a b; do openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256"
                            " -nodes -keyout $n.key -out $n.crt -days 1 -subj /CN=$n 2>/dev/null || exit 1; done"
                            " && echo 'not a pem' > junk.pem";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl req";
  }
  void SetUp() override { ctx_ = SSL_CTX_new(TLS_method()); }
  void TearDown() override { SSL_CTX_free(ctx_); }
  static std::string at(const std::string& name) { return dir_ + "/" + name; }
  static std::string key_text(const std::string& name) {
    std::ifstream in(at(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  static inline std::string dir_;
  SSL_CTX* ctx_ = nullptr;
};

TEST_F(TlsFilesTest, AChainItsKeyAndACaLoad) {
  EXPECT_TRUE(load_tls_files(ctx_, {at("b.crt"), at("a.crt"), at("a.key")}, k_names, false).ok());
  EXPECT_TRUE(load_tls_files(ctx_, {}, k_names, true).ok());  // the system store
}

TEST_F(TlsFilesTest, EveryBadFileIsNamedByItsOption) {
  struct Case {
    TlsFiles files;
    std::string want;
  } cases[] = {
      {{"", at("a.crt"), at("b.key")}, "--key " + at("b.key")},  // OpenSSL: "key values mismatch"
      {{"", at("a.crt"), ""}, "--cert and --key go together"},
      {{"", "", at("a.key")}, "--cert and --key go together"},
      {{at("missing.pem"), "", ""}, "--ca " + at("missing.pem")},
      {{at("junk.pem"), "", ""}, "--ca " + at("junk.pem")},
      {{"", at("junk.pem"), at("a.key")}, "--cert " + at("junk.pem")},
      {{"", at("a.crt"), at("junk.pem")}, "--key " + at("junk.pem")},
  };
  const std::string secret = key_text("b.key").substr(40, 40);
  for (const auto& c : cases) {
    auto s = load_tls_files(ctx_, c.files, k_names, false);
    ASSERT_FALSE(s.ok()) << c.want;
    EXPECT_EQ(s.error().code, Errc::invalid_argument);
    EXPECT_EQ(s.error().message.rfind(c.want, 0), 0u) << s.error().message;
    EXPECT_EQ(s.error().message.find(secret), std::string::npos);
  }
}

}  // namespace
}  // namespace kcache
