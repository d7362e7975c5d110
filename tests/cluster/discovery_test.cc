// Workers found by name, as a cluster finds them, with mutual TLS on every call: through DNS
// (dns://SERVER/NAME:PORT against dnsmasq on a loopback port, as with a Kubernetes headless
// Service) and through the Kubernetes API (k8s:// against fake_kube_api.py, a stand-in API
// server). Workers listen on 127.0.0.2 and 127.0.0.3 with one port, so a name can stand for
// either. While traffic runs the set changes: a decode worker added is used; one removed gets no
// new requests, and the stream it serves finishes with the engine's tokens. No request fails.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/rpc/health_check.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

// A Generate stream read on its own thread as fast as the router sends it.
class StreamReader {
 public:
  StreamReader(v1::Yoco::Stub& stub, const v1::GenerateRequest& request)
      : thread_([this, &stub, request] {
          result_ = Generate(stub, request, absl::Seconds(120), &received_);
        }) {}
  ~StreamReader() {
    if (thread_.joinable()) thread_.join();
  }
  int received() const { return received_.load(); }
  Generated Finish() {
    thread_.join();
    return result_;
  }

 private:
  std::atomic<int> received_{0};
  Generated result_;
  std::thread thread_;
};

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir();
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(MakeTestCa(dir_, "ca").ok());
    ASSERT_TRUE(MakeTestCertificate(dir_, "router", "ca", 2, 150).ok());
    ASSERT_TRUE(MakeTestCertificate(dir_, "client", "ca", 2, 200).ok());
  }
  void TearDown() override {
    if (HasFailure()) {
      for (Service* s : {prefill_.get(), decode1_.get(), decode2_.get(), router_.get()}) {
        if (s != nullptr) ADD_FAILURE() << s->process().LogTail();
      }
    }
    router_.reset();
    prefill_.reset();
    decode1_.reset();
    decode2_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Prefill and a decode worker on 127.0.0.2, a second decode worker on 127.0.0.3 with the first
  // one's port. Their certificates name `names` only (the router verifies the name it looked up,
  // not an address; the test's own calls verify `tls_name`); the second's also 127.0.0.3, for
  // calls made to it directly.
  void StartWorkers(const std::string& names, const std::string& tls_name,
                    std::vector<std::string> second_decode_flags) {
    ASSERT_TRUE(MakeTestCertificate(dir_, "server", "ca", 2, 100, names).ok());
    ASSERT_TRUE(MakeTestCertificate(dir_, "server3", "ca", 2, 110, names + ",IP:127.0.0.3").ok());
    const std::vector<std::string> worker = {"--model",
                                             TinyModelDir(),
                                             "--tls",
                                             "tcp",
                                             "--net-devices",
                                             "lo",
                                             "--threads",
                                             "1",
                                             "--tls-ca",
                                             dir_ + "/ca.pem",
                                             "--tls-cert",
                                             dir_ + "/server.pem",
                                             "--tls-key",
                                             dir_ + "/server.key",
                                             "--allowed-callers",
                                             "router"};
    const auto as_router = TestCredentials(dir_, "router");
    auto prefill = Service::Start(Role::kPrefill, worker, dir_ + "/prefill", 0, as_router,
                                  "127.0.0.2", tls_name);
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    prefill_ = *std::move(prefill);
    auto decode1 = Service::Start(Role::kDecode, worker, dir_ + "/decode1", 0, as_router,
                                  "127.0.0.2", tls_name);
    ASSERT_TRUE(decode1.ok()) << decode1.status();
    decode1_ = *std::move(decode1);
    std::vector<std::string> second = worker;
    second.insert(second.end(),
                  {"--tls-cert", dir_ + "/server3.pem", "--tls-key", dir_ + "/server3.key"});
    second.insert(second.end(), second_decode_flags.begin(), second_decode_flags.end());
    auto decode2 = Service::Start(Role::kDecode, second, dir_ + "/decode2", decode1_->port(),
                                  as_router, "127.0.0.3", tls_name);
    ASSERT_TRUE(decode2.ok()) << decode2.status();
    decode2_ = *std::move(decode2);
  }

  void StartRouter(const std::string& prefill, const std::string& decode,
                   std::vector<std::string> flags) {
    flags.insert(flags.end(),
                 {"--model", TinyModelDir(), "--prefill", prefill, "--decode", decode,
                  "--discovery-interval-ms", "200", "--probe-interval-ms", "200",
                  // A paused worker (below) is no stalled one: its stream must stay with it.
                  "--min-stall-ms", "60000", "--tls-ca", dir_ + "/ca.pem", "--tls-cert",
                  dir_ + "/router.pem", "--tls-key", dir_ + "/router.key"});
    auto router =
        Service::Start(Role::kRouter, flags, dir_ + "/router", 0, TestCredentials(dir_, "client"));
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = *std::move(router);
    stub_ = v1::Yoco::NewStub(router_->Channel());
  }

  // A request through the router gives the in-process engine's tokens.
  void ExpectEngineTokens(const std::vector<int32_t>& prompt, int max_new_tokens,
                          const std::string& what) {
    const Generated got = yoco::testing::Generate(*stub_, Request(prompt, max_new_tokens));
    ASSERT_TRUE(got.status.ok()) << what << ": " << got.status.error_message();
    EXPECT_EQ(got.tokens, InProcessTokens(prompt, max_new_tokens)) << what;
  }

  double Steps(Service& decode) { return decode.Metric("yoco_decode_steps_total"); }

  // The change of the worker set, made by the test.
  using Change = std::function<void()>;
  // Traffic first reaches only the listed decode worker (127.0.0.2); a long stream starts on it;
  // with the worker paused mid-stream, `change` lists 127.0.0.3 instead; requests go there, the
  // stream finishes on the removed worker with the engine's tokens, and nothing new goes to it.
  void ExpectStreamsSurviveAChangeOfWorkers(const Change& change) {
    ExpectEngineTokens({0, 17, 5, 99, 254}, 12, "found by name");
    EXPECT_EQ(Steps(*decode2_), 0) << "a worker not listed was used";

    const std::vector<int32_t> long_prompt = {0, 42, 7, 300, 11, 8};
    constexpr int kLong = 4000;
    StreamReader stream(*stub_, Request(long_prompt, kLong));
    ASSERT_TRUE(WaitFor([&] { return stream.received() > 0; }, absl::Seconds(60)));
    // A fast machine finishes the stream in well under a second: the worker serving it is paused
    // while the set changes and other requests run, so it is certainly mid-stream.
    decode1_->process().Pause();
    change();
    absl::SleepFor(absl::Seconds(1));  // a few discovery rounds
    for (int i = 1; i <= 3; ++i) {
      ExpectEngineTokens({0, 10 + i, 5, 9}, 10, absl::StrCat("request ", i, " after the change"));
    }
    EXPECT_GT(Steps(*decode2_), 0) << "the added worker was not used";
    EXPECT_LT(stream.received(), kLong) << "the stream ended too soon to test draining";
    decode1_->process().Resume();
    const Generated finished = stream.Finish();
    ASSERT_TRUE(finished.status.ok()) << finished.status.error_message();
    EXPECT_EQ(finished.tokens, InProcessTokens(long_prompt, kLong))
        << "the removed worker's stream";

    const double before = Steps(*decode1_);
    ExpectEngineTokens({0, 77, 3}, 10, "after the stream");
    EXPECT_EQ(Steps(*decode1_), before) << "a request went to the removed worker";
  }

  std::string dir_;
  std::unique_ptr<Service> prefill_, decode1_, decode2_, router_;
  std::unique_ptr<v1::Yoco::Stub> stub_;
};

TEST_F(DiscoveryTest, ThroughDns) {
  // The second decode worker's state memory (2 MiB) holds one long sequence (~1.6 MB): it says
  // NOT_SERVING while it decodes one.
  ASSERT_NO_FATAL_FAILURE(StartWorkers("DNS:prefill.yoco.test,DNS:decode.yoco.test",
                                       "decode.yoco.test", {"--memory-budget-mb", "2"}));
  const std::string hosts = dir_ + "/hosts";
  auto records = [&](const std::string& decode_ip) {
    // Written whole, then renamed: dnsmasq never reads half a file.
    std::ofstream(hosts + ".new") << "127.0.0.2 prefill.yoco.test\n"
                                  << decode_ip << " decode.yoco.test\n";
    std::filesystem::rename(hosts + ".new", hosts);
  };
  records("127.0.0.2");
  const int dns_port = FreePort();
  auto dns = ServiceProcess::Start(
      "/usr/sbin/dnsmasq",
      {"--keep-in-foreground", absl::StrCat("--port=", dns_port), "--listen-address=127.0.0.1",
       "--bind-interfaces", "--no-resolv", "--no-hosts", "--addn-hosts=" + hosts, "--local-ttl=0",
       "--pid-file=", "--user=root", "--log-facility=" + dir_ + "/dnsmasq.log"},
      dir_ + "/dnsmasq.out");
  ASSERT_TRUE(dns.ok()) << dns.status();
  const std::string server = absl::StrCat("dns://127.0.0.1:", dns_port, "/");
  ASSERT_NO_FATAL_FAILURE(StartRouter(absl::StrCat(server, "prefill.yoco.test:", prefill_->port()),
                                      absl::StrCat(server, "decode.yoco.test:", decode1_->port()),
                                      {}));

  ExpectStreamsSurviveAChangeOfWorkers([&] {
    records("127.0.0.3");
    kill((*dns)->pid(), SIGHUP);  // dnsmasq rereads its hosts files
  });

  // Readiness under a full decode worker.
  const std::shared_ptr<grpc::Channel> second = decode2_->Channel();
  auto ready = [&] {
    absl::StatusOr<HealthState> state =
        CheckHealth(second, "yoco.v1.DecodeWorker", absl::Seconds(3));
    return state.ok() ? *state : HealthState::kUnknown;
  };
  EXPECT_EQ(ready(), HealthState::kServing);
  const std::vector<int32_t> prompt = {0, 42, 7, 300, 11, 8};
  StreamReader full(*stub_, Request(prompt, 1500));
  EXPECT_TRUE(WaitFor([&] { return ready() == HealthState::kNotServing; }, absl::Seconds(30)))
      << "never NOT_SERVING while full";
  const Generated got = full.Finish();
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.tokens, InProcessTokens(prompt, 1500));
  EXPECT_TRUE(WaitFor([&] { return ready() == HealthState::kServing; }, absl::Seconds(10)))
      << "never SERVING again";
}

TEST_F(DiscoveryTest, ThroughTheApiServer) {
  ASSERT_NO_FATAL_FAILURE(StartWorkers("DNS:yoco-workers", "yoco-workers", {}));
  ASSERT_TRUE(MakeTestCa(dir_, "apica").ok());
  ASSERT_TRUE(MakeTestCertificate(dir_, "apiserver", "apica", 2, 50).ok());
  std::ofstream(dir_ + "/token") << "service-account-token-0123456789\n";
  std::ofstream(dir_ + "/pods.json")
      << R"({"prefill": [["yoco-prefill-0", "127.0.0.2", true]],)"
      << R"( "decode": [["yoco-decode-0", "127.0.0.2", true], ["yoco-decode-1", "127.0.0.3", false]]})";
  const int api_port = FreePort();
  auto api = ServiceProcess::Start(
      "/usr/bin/python3",
      {absl::StrCat(YOCO_TEST_SOURCE_DIR, "/cluster/fake_kube_api.py"), absl::StrCat(api_port),
       dir_ + "/apiserver.pem", dir_ + "/apiserver.key", dir_ + "/auth.log", dir_ + "/pods.json"},
      dir_ + "/api.log");
  ASSERT_TRUE(api.ok()) << api.status();
  // A watch event for the role's stream, as the API server would send it.
  auto event = [&](const std::string& type, const std::string& name, const std::string& ip) {
    const ToolRun posted =
        RunToCompletion("/usr/bin/curl",
                        {"-sf", "-m", "10", "--cacert", dir_ + "/apica.pem", "-X", "POST",
                         absl::StrCat("https://127.0.0.1:", api_port, "/control/decode"), "-d",
                         absl::StrCat(R"({"type": ")", type, R"(", "name": ")", name,
                                      R"(", "ip": ")", ip, R"(", "ready": true})")},
                        dir_ + "/curl.log");
    EXPECT_EQ(posted.status, 0) << posted.output;
  };
  const std::string query = "&tls_name=yoco-workers";
  ASSERT_NO_FATAL_FAILURE(
      StartRouter(absl::StrCat("k8s://yoco/role=prefill?port=", prefill_->port(), query),
                  absl::StrCat("k8s://yoco/role=decode?port=", decode1_->port(), query),
                  {"--k8s-api-server", absl::StrCat("https://127.0.0.1:", api_port),
                   "--k8s-token-file", dir_ + "/token", "--k8s-ca-file", dir_ + "/apica.pem"}));

  // The unready pod (yoco-decode-1) is not used until it becomes ready.
  ExpectStreamsSurviveAChangeOfWorkers([&] {
    event("MODIFIED", "yoco-decode-1", "127.0.0.3");
    event("DELETED", "yoco-decode-0", "127.0.0.2");
  });
  std::ifstream auth(dir_ + "/auth.log");
  std::string line;
  bool token_sent = false;
  while (std::getline(auth, line)) {
    token_sent |= line == "Bearer service-account-token-0123456789";
  }
  EXPECT_TRUE(token_sent) << "the router did not send its service account token";
}

}  // namespace
}  // namespace yoco::testing
