// The requests an attempt sends: a retry's carry the prompt plus the tokens already sent and ask
// only for the rest; each carries the client's sampling and stop settings.
#include "services/router/worker_requests.h"

#include <gtest/gtest.h>

#include <vector>

namespace yoco {
namespace {

AttemptRequest Retry(const std::vector<int32_t>& input) {
  AttemptRequest a;
  a.request_id = "req-7";
  a.input = input;
  a.sampling.temperature = 0.5f;
  a.sampling.seed = 99;
  a.sampling.stop_token_ids = {12};
  a.sampling.logprobs = 3;
  a.max_new_tokens = 5;
  a.stop_at_eos = false;
  a.scheduling.set_tenant("t1");
  a.scheduling.set_priority(-4);
  return a;
}

TEST(WorkerRequestsTest, RemotePrefillShipsToTheDecodeWorker) {
  const std::vector<int32_t> input = {1, 40, 41, 42};
  const v1::PrefillRequest r = RemotePrefillRequest(Retry(input), "salt", "ucx-addr", 3, 2500);
  EXPECT_EQ(r.request_id(), "req-7");
  EXPECT_EQ(std::vector<int32_t>(r.prompt().begin(), r.prompt().end()), input);
  EXPECT_EQ(r.cache_salt(), "salt");
  EXPECT_EQ(r.decode_ucx_address(), "ucx-addr");
  EXPECT_EQ(r.decode_resident_blocks(), 3u);
  EXPECT_EQ(r.transfer_timeout_ms(), 2500u);
  EXPECT_EQ(r.max_new_tokens(), 5u);
  EXPECT_FALSE(r.stop_at_eos());
  EXPECT_FLOAT_EQ(r.sampling().temperature(), 0.5f);
  EXPECT_EQ(r.sampling().seed(), 99u);
  ASSERT_EQ(r.sampling().stop_token_ids_size(), 1);
  EXPECT_EQ(r.sampling().stop_token_ids(0), 12);
  EXPECT_EQ(r.sampling().logprobs(), 3u);
  EXPECT_EQ(r.scheduling().tenant(), "t1");
  EXPECT_EQ(r.scheduling().priority(), -4);
}

TEST(WorkerRequestsTest, ALocalDecodeCarriesThePromptAShippedOneTheTransfer) {
  const std::vector<int32_t> input = {1, 40};
  const v1::DecodeRequest local = LocalDecodeRequest(Retry(input));
  EXPECT_EQ(std::vector<int32_t>(local.prompt().begin(), local.prompt().end()), input);
  EXPECT_EQ(local.sampling().seed(), 99u);
  EXPECT_EQ(local.max_new_tokens(), 5u);
  EXPECT_EQ(local.transfer_id(), 0u);
  EXPECT_EQ(local.sampling().logprobs(), 3u);
  EXPECT_EQ(local.scheduling().priority(), -4);

  v1::PrefillResponse shipped;
  shipped.set_sender_transport(0xfeed);
  shipped.set_transfer_id(31);
  const v1::DecodeRequest remote = ShippedDecodeRequest(Retry(input), shipped, 800);
  EXPECT_EQ(remote.request_id(), "req-7");
  EXPECT_TRUE(remote.prompt().empty());
  EXPECT_EQ(remote.sender_transport(), 0xfeedu);
  EXPECT_EQ(remote.transfer_id(), 31u);
  EXPECT_EQ(remote.wait_for_bundle_ms(), 800u);
  EXPECT_EQ(remote.max_new_tokens(), 5u);
  EXPECT_FALSE(remote.stop_at_eos());
  EXPECT_EQ(remote.scheduling().priority(), -4);
  // The bundle carries the sampling; the call says which logprobs to report.
  EXPECT_TRUE(remote.sampling().has_logprobs());
  EXPECT_EQ(remote.sampling().logprobs(), 3u);
  AttemptRequest quiet = Retry(input);
  quiet.sampling.logprobs = -1;
  EXPECT_FALSE(ShippedDecodeRequest(quiet, shipped, 800).sampling().has_logprobs());
}

// With penalties the decode worker needs the request's tokens so far: all it generated (the
// tokens already sent and the prefill's first) and, for repetition_penalty, the prompt's ids.
TEST(WorkerRequestsTest, AdjustingSamplingCarriesTheTokensSoFar) {
  const std::vector<int32_t> input = {0, 41, 40, 41, 7, 7};  // the last two sent already
  AttemptRequest a = Retry(input);
  a.generated_tokens = 2;
  a.sampling.repetition_penalty = 1.2f;
  a.sampling.frequency_penalty = 0.5f;
  EXPECT_EQ(RemotePrefillRequest(a, "", "ucx", 0, 100).generated_tokens(), 2u);
  EXPECT_EQ(LocalDecodeRequest(a).generated_tokens(), 2u);
  v1::PrefillResponse shipped;
  shipped.set_first_token(9);
  const v1::DecodeRequest remote = ShippedDecodeRequest(a, shipped, 800);
  EXPECT_EQ(std::vector<int32_t>(remote.generated().begin(), remote.generated().end()),
            std::vector<int32_t>({7, 7, 9}));
  EXPECT_EQ(std::vector<int32_t>(remote.prompt_ids().begin(), remote.prompt_ids().end()),
            std::vector<int32_t>({0, 40, 41}));
  EXPECT_FLOAT_EQ(remote.sampling().repetition_penalty(), 1.2f);
  EXPECT_FLOAT_EQ(remote.sampling().frequency_penalty(), 0.5f);

  a.sampling.repetition_penalty = 1.0f;  // no prompt ids needed
  EXPECT_TRUE(ShippedDecodeRequest(a, shipped, 800).prompt_ids().empty());
  a.sampling.frequency_penalty = 0.0f;  // nothing adjusts: no history at all
  EXPECT_TRUE(ShippedDecodeRequest(a, shipped, 800).generated().empty());
}

}  // namespace
}  // namespace yoco
