// What happens to state bundles nobody decodes, and to Decode calls nobody waits for: a request
// that ends on its first token ships nothing; bundles waiting for their call count against the
// decode worker's budget and expire on a timer without another arrival; a cancelled Decode call
// stops waiting at once instead of holding its thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/decode_worker.h"
#include "lib/workers/prefill_worker.h"
#include "tests/batching/decode_event_collector.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

using testing::RandomTokens;

UcxTransportOptions Loopback() { return BundleTransportOptions("tcp", "lo"); }

struct Pair {
  std::unique_ptr<PrefillWorker> prefill;
  std::unique_ptr<DecodeWorker> decode;
};

Pair MakePair(const std::shared_ptr<const Model>& model, DecodeWorkerOptions options) {
  Pair p;
  auto prefill = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback());
  EXPECT_TRUE(prefill.ok()) << prefill.status();
  options.transport = Loopback();
  auto decode = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options);
  EXPECT_TRUE(decode.ok()) << decode.status();
  if (prefill.ok()) p.prefill = std::move(*prefill);
  if (decode.ok()) p.decode = std::move(*decode);
  return p;
}

PrefillCall Call(const std::vector<int32_t>& prompt, const std::string& address) {
  PrefillCall call;
  call.prompt = prompt;
  call.decode_address = address;
  call.transfer_timeout = absl::Seconds(20);
  return call;
}

TEST(BundleLifetimeTest, RequestEndingOnItsFirstTokenShipsNothing) {
  auto model = testing::MakeModel(testing::SmallConfig(), 61, "first_token_ends");
  ASSERT_NE(model, nullptr);
  Pair p = MakePair(model, {});
  ASSERT_TRUE(p.prefill && p.decode);
  const auto prompt = RandomTokens(200, model->config().vocab_size, 5);

  PrefillCall one = Call(prompt, p.decode->address());
  one.max_new_tokens = 1;
  auto r = p.prefill->Prefill(one);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->shipped);
  const int32_t first = r->first_token;

  PrefillCall stop = Call(prompt, p.decode->address());  // greedy: the same first token
  stop.max_new_tokens = 50;
  stop.sampling.stop_token_ids = {first};
  r = p.prefill->Prefill(stop);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->shipped);
  EXPECT_EQ(r->first_token, first);

  EXPECT_EQ(p.prefill->transport().metrics().transfers_sent, 0u);
  EXPECT_EQ(p.decode->waiting_bundles(), 0u);

  // A request that continues still ships, and its bundle is what the decode worker waits on.
  PrefillCall more = Call(prompt, p.decode->address());
  more.max_new_tokens = 2;
  r = p.prefill->Prefill(more);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->shipped);
  EXPECT_EQ(p.decode->waiting_bundles(), 1u);
  EXPECT_EQ(p.decode->waiting_bundle_bytes(), static_cast<int64_t>(r->bundle_bytes));
}

TEST(BundleLifetimeTest, UnclaimedBundlesExpireWithoutAnotherArrival) {
  auto model = testing::MakeModel(testing::SmallConfig(), 62, "unclaimed_expire");
  ASSERT_NE(model, nullptr);
  DecodeWorkerOptions options;
  options.unclaimed_bundle_ttl = absl::Milliseconds(300);
  options.unclaimed_sweep_interval = absl::Milliseconds(50);
  Pair p = MakePair(model, options);
  ASSERT_TRUE(p.prefill && p.decode);
  for (int i = 0; i < 3; ++i) {
    auto r = p.prefill->Prefill(
        Call(RandomTokens(100, model->config().vocab_size, i), p.decode->address()));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(p.decode->waiting_bundles(), 3u);
  EXPECT_GT(p.decode->waiting_bundle_bytes(), 0);
  for (int i = 0; i < 100 && p.decode->waiting_bundles() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(p.decode->waiting_bundles(), 0u);
  EXPECT_EQ(p.decode->waiting_bundle_bytes(), 0);
}

TEST(BundleLifetimeTest, WaitingBundlesCannotOutgrowTheBudget) {
  auto model = testing::MakeModel(testing::SmallConfig(), 63, "unclaimed_budget");
  ASSERT_NE(model, nullptr);
  const auto prompt = RandomTokens(100, model->config().vocab_size, 9);
  // Measure one bundle, then give a decode worker room for two.
  int64_t bundle_bytes = 0;
  {
    Pair probe = MakePair(model, {});
    ASSERT_TRUE(probe.prefill && probe.decode);
    auto r = probe.prefill->Prefill(Call(prompt, probe.decode->address()));
    ASSERT_TRUE(r.ok()) << r.status();
    bundle_bytes = static_cast<int64_t>(r->bundle_bytes);
  }
  DecodeWorkerOptions options;
  options.batcher.memory_budget_bytes = 2 * bundle_bytes + bundle_bytes / 2;
  Pair p = MakePair(model, options);
  ASSERT_TRUE(p.prefill && p.decode);
  ASSERT_TRUE(p.prefill->Prefill(Call(prompt, p.decode->address())).ok());
  auto second = p.prefill->Prefill(Call(prompt, p.decode->address()));
  ASSERT_TRUE(second.ok()) << second.status();
  auto third = p.prefill->Prefill(Call(prompt, p.decode->address()));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_EQ(p.decode->waiting_bundles(), 2u);

  // Claiming one makes room again.
  testing::DecodeEventCollector stream;
  ASSERT_TRUE(p.decode
                  ->Decode({.sender = second->sender,
                            .transfer_id = second->transfer_id,
                            .max_new_tokens = 3,
                            .wait = absl::Seconds(5)},
                           stream.Callback())
                  .ok());
  ASSERT_TRUE(stream.WaitFinished());
  EXPECT_TRUE(p.prefill->Prefill(Call(prompt, p.decode->address())).ok());
}

TEST(BundleLifetimeTest, CancelledDecodeCallStopsWaitingAtOnce) {
  auto model = testing::MakeModel(testing::SmallConfig(), 64, "decode_cancel");
  ASSERT_NE(model, nullptr);
  Pair p = MakePair(model, {});
  ASSERT_TRUE(p.decode);
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancelled = true;
  });
  testing::DecodeEventCollector never;
  const auto start = std::chrono::steady_clock::now();
  auto id = p.decode->Decode(
      {.sender = 1, .transfer_id = 2, .max_new_tokens = 5, .wait = absl::Seconds(30)},
      never.Callback(), [&] { return cancelled.load(); });
  const auto waited = std::chrono::steady_clock::now() - start;
  canceller.join();
  EXPECT_EQ(id.status().code(), absl::StatusCode::kCancelled) << id.status();
  EXPECT_LT(waited, std::chrono::seconds(2));
}

}  // namespace
}  // namespace yoco
