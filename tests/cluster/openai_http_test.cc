// The router's OpenAI HTTP API against real clients: this test starts a cluster whose router
// serves HTTP, a second router serving HTTPS to tenants and a third asking HTTP clients for
// certificates, then runs openai_http_checks.sh (the official npm SDK, curl for SSE framing and
// malformed requests, a slow-loris client) against them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

constexpr char kToken[] = "tenant-a-token-0123456789";

// A router over `c`'s workers with `flags`, its HTTP API on `http_port`; returns once that API is
// listening too.
std::unique_ptr<Service> StartRouter(ServingCluster& c, const std::string& name, int http_port,
                                     std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--model", TinyModelDir(), "--prefill", c.prefill(0).address(),
                             "--decode", c.decode(0).address(), "--probe-interval-ms", "200",
                             "--http-listen", absl::StrCat("127.0.0.1:", http_port)});
  auto router = Service::Start(Role::kRouter, flags, c.dir() + "/" + name);
  EXPECT_TRUE(router.ok()) << router.status();
  if (!router.ok()) return nullptr;
  absl::StatusOr<int> http =
      (*router)->process().WaitForNumberAfter("API on port", absl::Seconds(30));
  EXPECT_TRUE(http.ok()) << http.status();
  return *std::move(router);
}

TEST(OpenAiHttpTest, TheSdkCurlAndMalformedRequests) {
  const int http = FreePort(), https_tenants = FreePort(), https_client_certs = FreePort();
  ClusterOptions options;
  options.router_flags = {
      "--http-listen", absl::StrCat("127.0.0.1:", http), "--http-max-body-bytes",
      "1000000",       "--http-read-timeout-seconds",    "1"};
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServingCluster& c = **cluster;
  ASSERT_TRUE(c.router().process().WaitForNumberAfter("API on port", absl::Seconds(30)).ok());

  const std::string dir = c.dir();
  ASSERT_TRUE(MakeTestCa(dir, "ca").ok());
  ASSERT_TRUE(MakeTestCertificate(dir, "server", "ca", 2, 100).ok());
  ASSERT_TRUE(MakeTestCertificate(dir, "client", "ca", 2, 200).ok());
  std::ofstream(dir + "/tenants.json")
      << R"({"tenants": {"team-a": {"tokens": [")" << kToken << R"("]}}})";
  const std::vector<std::string> tls = {"--http-tls-cert", dir + "/server.pem", "--http-tls-key",
                                        dir + "/server.key"};
  std::vector<std::string> flags = tls;
  flags.insert(flags.end(), {"--tenants", dir + "/tenants.json"});
  std::unique_ptr<Service> tenants = StartRouter(c, "router-tenants", https_tenants, flags);
  ASSERT_NE(tenants, nullptr);
  flags = tls;
  flags.insert(flags.end(), {"--http-tls-ca", dir + "/ca.pem"});
  std::unique_ptr<Service> client_certs =
      StartRouter(c, "router-client-certs", https_client_certs, flags);
  ASSERT_NE(client_certs, nullptr);

  auto checks = ServiceProcess::Start(
      "/bin/bash", {absl::StrCat(YOCO_TEST_SOURCE_DIR, "/cluster/openai_http_checks.sh")},
      dir + "/checks.log",
      {"BIN=" + std::filesystem::path(BinaryPath("yoco")).parent_path().string(),
       absl::StrCat("SDK=", YOCO_OPENAI_SDK_DIR), "LOG=" + dir,
       "MODEL_NAME=" + std::filesystem::path(TinyModelDir()).filename().string(),
       "ROUTER=" + c.router().address(), absl::StrCat("HTTP=127.0.0.1:", http),
       absl::StrCat("METRICS_ROUTER=127.0.0.1:", c.router().metrics_port()),
       absl::StrCat("METRICS_DECODE=127.0.0.1:", c.decode(0).metrics_port()),
       "ROUTER_LOG=" + c.router().process().log_path(),
       absl::StrCat("HTTP2=127.0.0.1:", https_tenants), absl::StrCat("TOKEN=", kToken),
       absl::StrCat("HTTP3=127.0.0.1:", https_client_certs),
       absl::StrCat("STRUCTURED_REQUESTS=", YOCO_STRUCTURED_REQUESTS)});
  ASSERT_TRUE(checks.ok()) << checks.status();
  const absl::StatusOr<int> exit = (*checks)->Wait(absl::Seconds(600));
  const std::string output = (*checks)->Log();
  EXPECT_TRUE(exit.ok() && *exit == 0) << output;
  EXPECT_NE(output.find("\n0 failures\n"), std::string::npos) << output;
}

}  // namespace
}  // namespace yoco::testing
