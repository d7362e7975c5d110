// Discovery: dns: targets parse (and bad ones say why); lookups turn into joins and leaves; a
// failed lookup keeps the known workers; the registry drops a removed worker from routing and
// takes it back under its old index.
#include "lib/routing/worker_discovery.h"

#include <gtest/gtest.h>

#include "lib/routing/dns_lookup.h"
#include "lib/routing/worker_registry.h"

namespace yoco {
namespace {

TEST(DnsWorkerTargetTest, ParsesGrpcStyleTargets) {
  auto system = DnsWorkerTarget::Parse("dns:///yoco-decode.yoco.svc.cluster.local:50071");
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_EQ(system->server, "");
  EXPECT_EQ(system->name, "yoco-decode.yoco.svc.cluster.local");
  EXPECT_EQ(system->port, 50071);
  auto named = DnsWorkerTarget::Parse("dns://10.0.0.10:5353/decode:7");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->server, "10.0.0.10");
  EXPECT_EQ(named->server_port, 5353);
  for (const char* bad : {"dns:decode:1", "dns:///decode", "dns:///decode:0", "dns:///decode:70000",
                          "dns://name-not-ip:53/decode:1", "dns:///:80"}) {
    EXPECT_EQ(DnsWorkerTarget::Parse(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// dns:///NAME resolves as gRPC's own dns:/// does: /etc/hosts counts (res_nsearch alone found
// no localhost).
TEST(DnsWorkerTargetTest, SystemResolverReadsHostsFile) {
  auto localhost = DnsWorkerTarget::Parse("dns:///localhost:50071");
  ASSERT_TRUE(localhost.ok());
  auto found = localhost->Resolve();
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_FALSE(found->empty());
  for (const std::string& address : *found) {
    EXPECT_TRUE(address == "127.0.0.1:50071" || address == "[::1]:50071") << address;
  }
}

TEST(WorkerDiscoveryTest, LookupsBecomeJoinsAndLeavesAndFailuresKeepTheSet) {
  absl::StatusOr<std::vector<std::string>> answer = std::vector<std::string>{"a:1", "b:1"};
  std::vector<std::string> log;
  WorkerDiscovery discovery(
      "test", [&] { return answer; }, [&](const std::string& a) { log.push_back("+" + a); },
      [&](const std::string& a) { log.push_back("-" + a); }, absl::ZeroDuration());
  EXPECT_EQ(log, (std::vector<std::string>{"+a:1", "+b:1"}));
  answer = std::vector<std::string>{"b:1", "c:1"};
  ASSERT_TRUE(discovery.Sync().ok());
  EXPECT_EQ(log, (std::vector<std::string>{"+a:1", "+b:1", "-a:1", "+c:1"}));
  answer = absl::UnavailableError("DNS is down");
  EXPECT_FALSE(discovery.Sync().ok());
  EXPECT_EQ(log.size(), 4u);  // nobody left
  EXPECT_EQ(discovery.failed_lookups(), 1u);
  answer = std::vector<std::string>{};  // the name is gone: every worker leaves
  ASSERT_TRUE(discovery.Sync().ok());
  EXPECT_EQ(log, (std::vector<std::string>{"+a:1", "+b:1", "-a:1", "+c:1", "-b:1", "-c:1"}));
}

TEST(WorkerDiscoveryTest, RegistryRemovesAndTakesBackWorkers) {
  WorkerProbes probes;
  probes.info = [](size_t) -> absl::StatusOr<v1::WorkerInfo> { return v1::WorkerInfo(); };
  WorkerRegistry registry({}, probes, absl::ZeroDuration());
  EXPECT_EQ(registry.Add("a:1"), 0u);
  EXPECT_EQ(registry.Add("b:1"), 1u);
  EXPECT_EQ(registry.HealthyWorkers(), (std::vector<size_t>{0, 1}));
  registry.Remove("a:1");
  EXPECT_EQ(registry.HealthyWorkers(), (std::vector<size_t>{1}));
  EXPECT_EQ(registry.Members(), (std::vector<std::string>{"b:1"}));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(registry.Choose({.prompt_tokens = 10, .load_penalty_tokens = 1})->index, 1u);
  registry.ProbeAll();  // a probe never brings a removed worker back
  EXPECT_EQ(registry.HealthyWorkers(), (std::vector<size_t>{1}));
  EXPECT_EQ(registry.Add("a:1"), 0u);  // back, under its old index
  EXPECT_EQ(registry.HealthyWorkers(), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(registry.size(), 2u);
}

}  // namespace
}  // namespace yoco
