// TransportAddress: only envelopes sealed with the same key open; every corruption, truncation
// and forgery is refused before any byte reaches UCX. The key file is read safely.
#include "lib/transport/transport_address.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "lib/files/key_file.h"

namespace yoco {
namespace {

TransportAddress Sample() {
  std::string ucx(300, '\0');
  std::mt19937 rng(7);
  for (char& c : ucx) c = static_cast<char>(rng());
  return {1234, 0x1122334455667788ull, ucx};
}

TEST(TransportAddressTest, OpensWhatWasSealedWithTheSameKey) {
  for (const std::string& key : {std::string(), std::string("0123456789abcdef-cluster-key")}) {
    const TransportAddress in = Sample();
    auto out = OpenTransportAddress(SealTransportAddress(in, key), key);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->pid, in.pid);
    EXPECT_EQ(out->host, in.host);
    EXPECT_EQ(out->ucx, in.ucx);
  }
}

TEST(TransportAddressTest, EveryAlteredByteIsRefused) {
  const std::string key = "0123456789abcdef";
  const std::string sealed = SealTransportAddress(Sample(), key);
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string altered = sealed;
    altered[i] ^= 0x01;
    EXPECT_EQ(OpenTransportAddress(altered, key).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "byte " << i;
  }
}

TEST(TransportAddressTest, AnotherKeyOrNoKeyIsRefused) {
  const std::string sealed = SealTransportAddress(Sample(), "0123456789abcdef");
  EXPECT_FALSE(OpenTransportAddress(sealed, "0123456789abcdeX").ok());
  EXPECT_FALSE(OpenTransportAddress(sealed, "").ok());
  EXPECT_FALSE(OpenTransportAddress(SealTransportAddress(Sample(), ""), "0123456789abcdef").ok());
}

// The reproduction that used to abort a worker inside UCX: our header, then random bytes.
TEST(TransportAddressTest, OurHeaderFollowedByRandomBytesIsRefused) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::string forged = "YUCX";
    const size_t n = 16 + rng() % 600;
    for (size_t i = 0; i < n; ++i) forged.push_back(static_cast<char>(rng()));
    EXPECT_EQ(OpenTransportAddress(forged, "").status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(TransportAddressTest, WrongLengthsAreRefused) {
  const std::string sealed = SealTransportAddress(Sample(), "");
  for (size_t n : {size_t{0}, size_t{3}, size_t{20}, sealed.size() - 1}) {
    EXPECT_FALSE(OpenTransportAddress(sealed.substr(0, n), "").ok()) << n;
  }
  EXPECT_FALSE(OpenTransportAddress(sealed + "x", "").ok());
  EXPECT_FALSE(OpenTransportAddress(SealTransportAddress({1, 2, ""}, ""), "").ok());
}

class TransportKeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/yoco-key-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(TransportKeyFileTest, ReadsARegularFileWithoutItsTrailingNewline) {
  auto key = ReadKeyFile(Write("key", "s3cret-s3cret-s3cret\n"), "key");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "s3cret-s3cret-s3cret");
}

TEST_F(TransportKeyFileTest, RefusesShortHugeSpecialAndMissingFiles) {
  EXPECT_FALSE(ReadKeyFile(Write("short", "abc\n"), "key").ok());
  EXPECT_FALSE(ReadKeyFile(Write("huge", std::string(10000, 'k')), "key").ok());
  EXPECT_FALSE(ReadKeyFile(dir_ + "/missing", "key").ok());
  EXPECT_FALSE(ReadKeyFile(dir_, "key").ok());  // a directory
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(ReadKeyFile(fifo, "key").ok());  // returns at once instead of blocking
  const std::string zero = dir_ + "/zero";
  ASSERT_EQ(symlink("/dev/zero", zero.c_str()), 0);
  EXPECT_FALSE(ReadKeyFile(zero, "key").ok());
}

}  // namespace
}  // namespace yoco
