// Bursts are queued at the router, not refused: 96 streams opened at once against a prefill
// worker that queues 2 and a decode worker that batches and queues 8 are all served, each with
// the tokens it gets alone in process, the requests every worker refused for load having waited
// at the router (yoco_router_load_waits_total). A router without a wait queue
// (--max-waiting-requests 0) refuses the same burst with RESOURCE_EXHAUSTED.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cluster/concurrent_requests.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

constexpr int kStreams = 96;
constexpr int kTokens = 24;

TEST(ClusterBurstTest, QueuedAtTheRouterNotRefused) {
  ClusterOptions options;
  options.worker_flags = {"--threads", "0"};
  options.decode_flags = {"--max-batch", "8", "--max-queue", "8"};
  options.prefill_flags = {"--max-queue", "2"};
  // No local prefill: every request goes through the prefill worker's short queue. A decode
  // worker taking in dozens of bundles at once under the sanitizers can leave a stream silent
  // for over the stall floor: that is load, not a hung worker (ClusterStallTest tests those), and
  // with one decode worker a cut stream has nowhere to go.
  options.router_flags = {"--local-prefill-max-tokens", "0", "--min-stall-ms", "60000"};
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServingCluster& c = **cluster;

  const std::vector<MixedRequest> mixed = MixedRequests(kStreams);
  std::vector<v1::GenerateRequest> requests;
  for (const MixedRequest& r : mixed) requests.push_back(Request(r.prompt, kTokens, r.sampling));
  const std::vector<Generated> served = GenerateAtOnce(c.stub(), requests);
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(absl::StrCat("stream ", i));
    EXPECT_TRUE(served[i].status.ok()) << served[i].status.error_message();
    EXPECT_EQ(served[i].tokens, InProcessTokens(mixed[i].prompt, kTokens, mixed[i].sampling));
  }
  EXPECT_GT(c.router().Metric("yoco_router_load_waits_total"), 0);

  // The same burst through a second router over the same workers, with no wait queue.
  std::vector<std::string> flags = {"--model",
                                    TinyModelDir(),
                                    "--prefill",
                                    c.prefill(0).address(),
                                    "--decode",
                                    c.decode(0).address(),
                                    "--probe-interval-ms",
                                    "200",
                                    "--max-waiting-requests",
                                    "0"};
  flags.insert(flags.end(), options.router_flags.begin(), options.router_flags.end());
  auto unqueued = Service::Start(Role::kRouter, flags, c.dir() + "/unqueued-router");
  ASSERT_TRUE(unqueued.ok()) << unqueued.status();
  auto stub = v1::Yoco::NewStub((*unqueued)->Channel());
  ASSERT_TRUE(WaitFor(
      [&] {
        return Generate(*stub, Request({0, 5}, 1)).status.ok();
      },
      absl::Seconds(60)));
  int refused = 0;
  for (const Generated& g : GenerateAtOnce(*stub, requests)) {
    refused += g.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace yoco::testing
