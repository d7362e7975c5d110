// Conditional disaggregation at the library level: a decode worker that prefills a prompt
// itself streams the tokens a prefill worker's shipped bundle gives (bit-exact prefill on the
// cache's 128-token grid), counts the first token, ends on it when it should, and refuses bad
// calls without leaving a sequence behind.
#include <gtest/gtest.h>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/decode_worker.h"
#include "lib/workers/prefill_worker.h"
#include "tests/batching/decode_event_collector.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

using Stream = testing::DecodeEventCollector;
using testing::RandomTokens;

UcxTransportOptions Loopback() { return BundleTransportOptions("tcp", "lo"); }

std::unique_ptr<DecodeWorker> LocalDecodeWorker(std::shared_ptr<const Model> model,
                                                int max_batch = 8) {
  DecodeWorkerOptions options;
  options.transport = Loopback();
  options.batcher.max_batch = max_batch;
  auto w = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options,
                                std::make_unique<CpuBackend>(model));
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? std::move(*w) : nullptr;
}

LocalPrefillCall Local(std::vector<int32_t> prompt, SamplingParams sampling, int max_new) {
  LocalPrefillCall call;
  call.prompt = std::move(prompt);
  call.sampling = std::move(sampling);
  call.max_new_tokens = max_new;
  return call;
}

// Lengths around the grid's boundaries, where a prefill split differently would round
// differently; greedy and sampled.
TEST(LocalPrefillTest, LocalPrefillStreamsTheTokensOfAShippedBundle) {
  for (bool swa : {false, true}) {
    SCOPED_TRACE(swa ? "sliding window" : "gated retention");
    auto model =
        testing::MakeModel(testing::SmallConfig(swa ? std::optional<int>(37) : std::nullopt), 61,
                           swa ? "local_swa" : "local_gret");
    ASSERT_NE(model, nullptr);
    auto prefill = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback());
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    auto decode = LocalDecodeWorker(model);
    ASSERT_NE(decode, nullptr);
    ASSERT_TRUE(decode->local_prefill());
    constexpr int kNew = 12;
    int case_index = 0;
    for (int length : {1, 2, 127, 128, 129, 255, 256, 257, 383}) {
      for (float temperature : {0.0f, 0.8f}) {
        SCOPED_TRACE(::testing::Message() << "length " << length << " T " << temperature);
        SamplingParams sampling;
        sampling.temperature = temperature;
        sampling.top_k = temperature > 0 ? 20 : 0;
        sampling.seed = 100 + case_index++;
        const auto prompt = RandomTokens(length, model->config().vocab_size, length);
        PrefillCall call;
        call.prompt = prompt;
        call.sampling = sampling;
        call.decode_address = decode->address();
        call.transfer_timeout = absl::Seconds(20);
        call.max_new_tokens = kNew;
        auto shipped = (*prefill)->Prefill(call);
        ASSERT_TRUE(shipped.ok()) << shipped.status();
        Stream remote;
        ASSERT_TRUE(decode
                        ->Decode(shipped->sender, shipped->transfer_id, kNew - 1, false,
                                 absl::Seconds(10), remote.Callback())
                        .ok());
        Stream local;
        auto id = decode->PrefillAndDecode(Local(prompt, sampling, kNew), local.Callback());
        ASSERT_TRUE(id.ok()) << id.status();
        EXPECT_GT(*id, 0u);
        ASSERT_TRUE(remote.WaitFinished());
        ASSERT_TRUE(local.WaitFinished());
        std::vector<int32_t> want = {shipped->first_token};
        want.insert(want.end(), remote.tokens.begin(), remote.tokens.end());
        EXPECT_EQ(local.tokens, want);
        EXPECT_EQ(local.reason, DecodeFinish::kLength);
        // Every event counts the first token: 1, 2, ..., kNew, and the finish kNew.
        std::vector<int> counts;
        for (int i = 1; i <= kNew; ++i) counts.push_back(i);
        counts.push_back(kNew);
        EXPECT_EQ(local.generated, counts);
      }
    }
    EXPECT_EQ(decode->local_prefills(), static_cast<uint64_t>(case_index));
    EXPECT_EQ(decode->stats().active, 0);
  }
}

TEST(LocalPrefillTest, FirstTokenThatEndsTheRequestLeavesNoSequence) {
  auto model = testing::MakeModel(testing::SmallConfig(), 62, "local_first");
  ASSERT_NE(model, nullptr);
  auto decode = LocalDecodeWorker(model);
  ASSERT_NE(decode, nullptr);
  const auto prompt = RandomTokens(40, model->config().vocab_size, 5);

  Stream one;
  auto id = decode->PrefillAndDecode(Local(prompt, {}, 1), one.Callback());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, 0u);
  ASSERT_TRUE(one.WaitFinished(1));  // already finished: sent on the calling thread
  ASSERT_EQ(one.tokens.size(), 1u);
  EXPECT_EQ(one.reason, DecodeFinish::kLength);

  // The same first token as a stop id, then as EOS with stop_at_eos.
  SamplingParams stop;
  stop.stop_token_ids = {one.tokens[0]};
  Stream stopped;
  ASSERT_EQ(*decode->PrefillAndDecode(Local(prompt, stop, 50), stopped.Callback()), 0u);
  EXPECT_EQ(stopped.tokens, one.tokens);
  EXPECT_EQ(stopped.reason, DecodeFinish::kStop);
  EXPECT_EQ(decode->stats().active, 0);
  EXPECT_EQ(decode->stats().queued, 0);
}

TEST(LocalPrefillTest, BadCallsAreRefusedAndLeaveNothingBehind) {
  ModelConfig config = testing::SmallConfig();
  config.max_seq_len = 100;
  auto model = testing::MakeModel(config, 63, "local_refuse");
  auto other = testing::MakeModel(config, 64, "local_refuse_other");
  ASSERT_TRUE(model && other);
  auto decode = LocalDecodeWorker(model);
  ASSERT_NE(decode, nullptr);
  const int vocab = model->config().vocab_size;
  const auto prompt = RandomTokens(20, vocab, 9);
  auto code = [&](const LocalPrefillCall& call, const std::function<bool()>& cancelled = nullptr) {
    Stream s;
    auto id = decode->PrefillAndDecode(call, s.Callback(), cancelled);
    EXPECT_TRUE(s.tokens.empty() && !s.finished) << "events for a refused call";
    return id.status().code();
  };
  EXPECT_EQ(code(Local({}, {}, 4)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Local({0, vocab}, {}, 4)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Local({0, -1}, {}, 4)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Local(RandomTokens(101, vocab, 2), {}, 4)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Local(prompt, {}, 0)), absl::StatusCode::kInvalidArgument);
  SamplingParams bad;
  bad.temperature = -1;
  EXPECT_EQ(code(Local(prompt, bad, 4)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Local(prompt, {}, 4), [] { return true; }), absl::StatusCode::kCancelled);
  EXPECT_EQ(decode->local_prefills(), 0u);
  EXPECT_EQ(decode->stats().active + decode->stats().queued, 0);

  // Without a prefill backend: FAILED_PRECONDITION; one over another model: refused at Create.
  DecodeWorkerOptions options;
  options.transport = Loopback();
  auto plain = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->local_prefill());
  Stream s;
  EXPECT_EQ((*plain)->PrefillAndDecode(Local(prompt, {}, 4), s.Callback()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto mixed = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options,
                                    std::make_unique<CpuBackend>(other));
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace yoco
