// A seed reproduces its tokens under any load: for every weight format and K/V dtype, 64 streams
// (half greedy, half seeded sampling) opened at once through router, prefill and decode workers
// give exactly the tokens each request gets alone in process, although the decode worker
// batches them 32 at a time in whatever order they arrive (and the prefill worker queues 32, so
// half of them wait at the router for room first).
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cluster/concurrent_requests.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

constexpr int kStreams = 64;
constexpr int kTokens = 120;

void ExpectTheTokensOfEachAlone(const std::string& weights, const std::string& kv_dtype) {
  ClusterOptions options;
  // Every core: the batch's kernels split across threads as in production.
  options.worker_flags = {"--threads", "0", "--weights", weights, "--kv-dtype", kv_dtype};
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  const std::vector<MixedRequest> mixed = MixedRequests(kStreams);
  std::vector<v1::GenerateRequest> requests;
  for (const MixedRequest& r : mixed) requests.push_back(Request(r.prompt, kTokens, r.sampling));
  const std::vector<Generated> served = GenerateAtOnce((*cluster)->stub(), requests);
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(absl::StrCat("stream ", i, i % 2 ? " (seeded)" : " (greedy)"));
    EXPECT_TRUE(served[i].status.ok()) << served[i].status.error_message();
    EXPECT_EQ(served[i].tokens, InProcessTokens(mixed[i].prompt, kTokens, mixed[i].sampling,
                                                TinyModelDir(), weights, kv_dtype));
  }
}

TEST(ClusterDeterminismTest, AsStoredWeightsF32Kv) {
  ExpectTheTokensOfEachAlone("as-stored", "f32");
}
TEST(ClusterDeterminismTest, AsStoredWeightsBf16Kv) {
  ExpectTheTokensOfEachAlone("as-stored", "bf16");
}
TEST(ClusterDeterminismTest, Bf16WeightsF32Kv) { ExpectTheTokensOfEachAlone("bf16", "f32"); }
TEST(ClusterDeterminismTest, Bf16WeightsBf16Kv) { ExpectTheTokensOfEachAlone("bf16", "bf16"); }
TEST(ClusterDeterminismTest, Q8WeightsF32Kv) { ExpectTheTokensOfEachAlone("q8", "f32"); }
TEST(ClusterDeterminismTest, Q8WeightsBf16Kv) { ExpectTheTokensOfEachAlone("q8", "bf16"); }

}  // namespace
}  // namespace yoco::testing
