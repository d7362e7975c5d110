// A seed reproduces its tokens under any load: for every weight format and K/V dtype, 64 streams
// (half greedy, half seeded sampling) opened at once through router, prefill and decode workers
// give exactly the tokens each request gets alone in process, although the decode worker
// batches them 32 at a time in whatever order they arrive (and the prefill worker queues 32, so
// half of them wait at the router for room first).
#include <gtest/gtest.h>

#include <tuple>

#include "absl/strings/str_cat.h"
#include "tests/cluster/concurrent_requests.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

constexpr int kStreams = 64;
constexpr int kTokens = 120;

class ClusterDeterminismTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ClusterDeterminismTest, ConcurrentStreamsGiveTheTokensOfEachAlone) {
  const auto& [weights, kv_dtype] = GetParam();
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

INSTANTIATE_TEST_SUITE_P(
    Formats, ClusterDeterminismTest,
    ::testing::Combine(::testing::Values("as-stored", "bf16", "q8"),
                       ::testing::Values("f32", "bf16")),
    [](const ::testing::TestParamInfo<ClusterDeterminismTest::ParamType>& info) {
      std::string name =
          absl::StrCat(std::get<0>(info.param), "_weights_", std::get<1>(info.param), "_kv");
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

}  // namespace
}  // namespace yoco::testing
