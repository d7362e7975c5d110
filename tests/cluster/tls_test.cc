// Mutual TLS end to end: a client presenting a certificate the CA signed gets the in-process
// engine's tokens; a plaintext client, one without a certificate, one with a certificate from
// another CA or an expired one, and one that trusts another CA are refused. The workers answer
// only the router's certificate (a client's is PERMISSION_DENIED), no one can cut a stream by its
// request id, a worker under mTLS without --allowed-callers does not start, and the router's
// certificate is rotated on disk and served without a restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/rpc/tls_credentials.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

class ClusterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.secure = true;
    // The workers answer the router's certificate before and after its rotation (server, then
    // next).
    options.worker_flags = {"--allowed-callers", "server,next", "--tls-reload-seconds", "1"};
    options.router_flags = {"--tls-reload-seconds", "1"};
    auto started = ServingCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
    dir_ = cluster_->dir();
  }

  // Generate through the router as a client with these credentials.
  Generated GenerateAs(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto stub = v1::Yoco::NewStub(grpc::CreateChannel(cluster_->router().address(), credentials));
    return Generate(*stub, Request(kPrompt, 8), absl::Seconds(20));
  }
  const std::vector<int32_t> kPrompt = {0, 17, 5, 99, 254, 31, 8};
  std::unique_ptr<ServingCluster> cluster_;
  std::string dir_;
};

TEST_F(ClusterTlsTest, OnlyCertificatesTheCaSignedAreServed) {
  ASSERT_TRUE(MakeTestCa(dir_, "rogue").ok());
  ASSERT_TRUE(MakeTestCertificate(dir_, "intruder", "rogue", 2, 300).ok());
  ASSERT_TRUE(MakeTestCertificate(dir_, "expired", "ca", 0, 400).ok());  // until this second

  const Generated ok = GenerateAs(cluster_->client_credentials());
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens, InProcessTokens(kPrompt, 8));
  EXPECT_FALSE(GenerateAs(grpc::InsecureChannelCredentials()).status.ok());
  EXPECT_FALSE(GenerateAs(TestCredentials(dir_, "")).status.ok());
  EXPECT_FALSE(GenerateAs(TestCredentials(dir_, "intruder")).status.ok());
  absl::SleepFor(absl::Milliseconds(1100));  // the expired certificate's last second has passed
  EXPECT_FALSE(GenerateAs(TestCredentials(dir_, "expired")).status.ok());
  // A client trusting another CA refuses the router.
  TlsFiles rogue;
  rogue.ca = dir_ + "/rogue.pem";
  rogue.cert = dir_ + "/client.pem";
  rogue.key = dir_ + "/client.key";
  EXPECT_FALSE(GenerateAs(*MakeChannelCredentials(rogue)).status.ok());
}

// The workers answer only the router's certificate (--allowed-callers): a client certificate of
// the same CA is PERMISSION_DENIED at every method of both. DecodeWorker.Cancel is gone, so
// nobody (a client, the router's own certificate) cuts another's stream by its request id.
TEST_F(ClusterTlsTest, WorkersAnswerOnlyTheRouter) {
  const ToolRun outsider =
      RunToCompletion(BinaryPath("forged_call"),
                      {"outsider", cluster_->prefill(0).address(), cluster_->decode(0).address(),
                       dir_ + "/ca.pem", dir_ + "/client.pem", dir_ + "/client.key"},
                      dir_ + "/outsider");
  EXPECT_EQ(outsider.status, 0) << outsider.output;

  const ToolRun cut = RunToCompletion(
      BinaryPath("forged_call"),
      {"cut-stream", cluster_->router().address(), cluster_->decode(0).address(), dir_ + "/ca.pem",
       dir_ + "/client.pem", dir_ + "/client.key", dir_ + "/server.pem", dir_ + "/server.key",
       "1500", absl::StrJoin(kPrompt, ",")},
      dir_ + "/cut", absl::Seconds(120));
  EXPECT_EQ(cut.status, 0) << cut.output;
  EXPECT_THAT(cut.output, ::testing::HasSubstr(absl::StrJoin(InProcessTokens(kPrompt, 1500), ",")));

  // A worker under mutual TLS without an allow-list does not start, nor one with an allow-list
  // and no verified identities to match.
  const ToolRun open = RunToCompletion(
      BinaryPath("yoco-decode"),
      {"--listen", "127.0.0.1:0", "--model", TinyModelDir(), "--tls-cert", dir_ + "/server.pem",
       "--tls-key", dir_ + "/server.key", "--tls-ca", dir_ + "/ca.pem"},
      dir_ + "/open-decode", absl::Seconds(20));
  EXPECT_EQ(open.status, 2);
  EXPECT_THAT(open.output, ::testing::HasSubstr("needs --allowed-callers"));
  const ToolRun unverified = RunToCompletion(
      BinaryPath("yoco-prefill"),
      {"--listen", "127.0.0.1:0", "--model", TinyModelDir(), "--allowed-callers", "server"},
      dir_ + "/unverified-prefill", absl::Seconds(20));
  EXPECT_EQ(unverified.status, 2);
  EXPECT_THAT(unverified.output, ::testing::HasSubstr("--allowed-callers needs mutual TLS"));
}

// A new certificate (serial 101) replaces the files, as cert-manager does; the router serves it
// within the reload interval, without a restart, and calls keep working.
TEST_F(ClusterTlsTest, ARotatedCertificateIsServedWithoutARestart) {
  auto served_serial = [&] {
    const std::string pipeline = absl::StrCat(
        "openssl s_client -connect ", cluster_->router().address(), " -alpn h2 -CAfile ", dir_,
        "/ca.pem -cert ", dir_, "/client.pem -key ", dir_,
        "/client.key < /dev/null 2> /dev/null | openssl x509 -noout -serial 2> /dev/null");
    return RunToCompletion("/bin/sh", {"-c", pipeline}, dir_ + "/s_client").output;
  };
  EXPECT_EQ(served_serial(), "serial=64\n");
  ASSERT_TRUE(MakeTestCertificate(dir_, "next", "ca", 2, 101).ok());
  std::filesystem::copy_file(dir_ + "/next.key", dir_ + "/server.key.new");
  std::filesystem::copy_file(dir_ + "/next.pem", dir_ + "/server.pem.new");
  std::filesystem::rename(dir_ + "/server.key.new", dir_ + "/server.key");
  std::filesystem::rename(dir_ + "/server.pem.new", dir_ + "/server.pem");
  EXPECT_TRUE(WaitFor([&] { return served_serial() == "serial=65\n"; }, absl::Seconds(10)));
  const Generated after = cluster_->Generate(Request(kPrompt, 8));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.tokens, InProcessTokens(kPrompt, 8));
}

}  // namespace
}  // namespace yoco::testing
