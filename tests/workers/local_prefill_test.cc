// Conditional disaggregation at the library level: a decode worker that prefills a prompt
// itself streams the tokens a prefill worker's shipped bundle gives (bit-exact prefill on the
// cache's 128-token grid), counts the first token, ends on it when it should, and refuses bad
// calls without leaving a sequence behind. Also the decode worker's non-blocking admission.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
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

// The batch drops a finished sequence just after its last event: wait for that.
bool BatchEmpties(DecodeWorker& worker) {
  for (int i = 0; i < 500; ++i) {
    const DecodeBatcherStats s = worker.stats();
    if (s.active == 0 && s.queued == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
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
                        ->Decode({.sender = shipped->sender,
                                  .transfer_id = shipped->transfer_id,
                                  .max_new_tokens = kNew - 1,
                                  .wait = absl::Seconds(10)},
                                 remote.Callback())
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
    EXPECT_TRUE(BatchEmpties(*decode));
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
  EXPECT_EQ(decode->stats().active, 0);  // never admitted, so no wait
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

  // Beyond the worker's own bound: FAILED_PRECONDITION (the router ships it instead).
  DecodeWorkerOptions bounded;
  bounded.transport = Loopback();
  bounded.local_prefill_max_tokens = 19;
  auto small = DecodeWorker::Create(std::make_unique<CpuBackend>(model), bounded,
                                    std::make_unique<CpuBackend>(model));
  ASSERT_TRUE(small.ok());
  Stream fits, too_long;
  EXPECT_TRUE(
      (*small)->PrefillAndDecode(Local(RandomTokens(19, vocab, 1), {}, 2), fits.Callback()).ok());
  EXPECT_TRUE(fits.WaitFinished());  // before `fits` goes
  EXPECT_EQ((*small)->PrefillAndDecode(Local(prompt, {}, 2), too_long.Callback()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(too_long.tokens.empty());

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

// The non-blocking entry points the Decode RPC uses: admission answered once, when the bundle
// comes (or at once), by deadline, or by cancellation; local prefills on the worker's thread.
struct Admission {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::StatusOr<uint64_t>> answers;
  std::function<void(absl::StatusOr<uint64_t>)> Callback() {
    return [this](absl::StatusOr<uint64_t> id) {
      std::lock_guard<std::mutex> lock(mu);
      answers.push_back(std::move(id));
      cv.notify_all();
    };
  }
  bool Wait(int seconds = 20) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return !answers.empty(); });
  }
};

TEST(AsyncAdmissionTest, DecodeWaitsForTheBundleWithoutBlocking) {
  auto model = testing::MakeModel(testing::SmallConfig(), 65, "async_admission");
  ASSERT_NE(model, nullptr);
  auto prefill = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback());
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = LocalDecodeWorker(model);
  ASSERT_NE(decode, nullptr);
  const auto prompt = RandomTokens(150, model->config().vocab_size, 8);
  constexpr int kNew = 9;
  CpuBackend local(model);
  const std::vector<int32_t> want = *Generate(local, prompt, GenerateOptions{kNew, {}, false});

  // The call comes first and returns at once with a ticket; the bundle that follows admits it.
  // The prefill worker numbers its transfers from 1.
  Stream early;
  Admission admitted;
  const uint64_t sender = (*prefill)->transport().id();
  const uint64_t ticket = decode->DecodeWhenArrived(
      {.sender = sender, .transfer_id = 1, .max_new_tokens = kNew - 1, .wait = absl::Seconds(20)},
      early.Callback(), admitted.Callback());
  EXPECT_NE(ticket, 0u);
  EXPECT_TRUE(admitted.answers.empty());
  PrefillCall call;
  call.prompt = prompt;
  call.decode_address = decode->address();
  call.transfer_timeout = absl::Seconds(20);
  auto shipped = (*prefill)->Prefill(call);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_EQ(shipped->transfer_id, 1u);
  ASSERT_TRUE(admitted.Wait());
  ASSERT_TRUE(admitted.answers[0].ok()) << admitted.answers[0].status();
  ASSERT_TRUE(early.WaitFinished());
  std::vector<int32_t> got = {shipped->first_token};
  got.insert(got.end(), early.tokens.begin(), early.tokens.end());
  EXPECT_EQ(got, want);
  decode->CancelWaiting(ticket);  // over already: nothing happens
  EXPECT_EQ(admitted.answers.size(), 1u);

  // A bundle that never comes: DEADLINE_EXCEEDED near the deadline (not at the sweep interval).
  Stream never;
  Admission late;
  const absl::Time start = absl::Now();
  EXPECT_NE(decode->DecodeWhenArrived({.sender = sender,
                                       .transfer_id = 999,
                                       .max_new_tokens = 4,
                                       .wait = absl::Milliseconds(100)},
                                      never.Callback(), late.Callback()),
            0u);
  ASSERT_TRUE(late.Wait());
  EXPECT_EQ(late.answers[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(900));

  // Cancelled while waiting: CANCELLED once; the bundle arriving later stays unclaimed.
  Stream cancelled_stream;
  Admission cancelled;
  const uint64_t t2 = decode->DecodeWhenArrived(
      {.sender = sender, .transfer_id = 2, .max_new_tokens = kNew - 1, .wait = absl::Seconds(20)},
      cancelled_stream.Callback(), cancelled.Callback());
  decode->CancelWaiting(t2);
  decode->CancelWaiting(t2);
  ASSERT_EQ(cancelled.answers.size(), 1u);
  EXPECT_EQ(cancelled.answers[0].status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE((*prefill)->Prefill(call).ok());
  EXPECT_EQ(decode->waiting_bundles(), 1u);
  EXPECT_TRUE(cancelled_stream.tokens.empty());

  // A bundle already there: admitted on the calling thread, no ticket.
  Stream ready;
  Admission now;
  EXPECT_EQ(decode->DecodeWhenArrived({.sender = sender,
                                       .transfer_id = 2,
                                       .max_new_tokens = kNew - 1,
                                       .wait = absl::Seconds(1)},
                                      ready.Callback(), now.Callback()),
            0u);
  ASSERT_EQ(now.answers.size(), 1u);
  EXPECT_TRUE(now.answers[0].ok());
  ASSERT_TRUE(ready.WaitFinished());
  EXPECT_EQ(decode->waiting_bundles(), 0u);
}

// One local prefill runs, max_local_prefills_waiting wait behind it, the next is refused at
// once; the ones that waited still give their tokens.
TEST(AsyncAdmissionTest, LocalPrefillsQueueUpToTheBoundAndRefuseBeyond) {
  auto model = testing::MakeModel(testing::SmallConfig(), 66, "async_local");
  ASSERT_NE(model, nullptr);
  DecodeWorkerOptions options;
  options.transport = Loopback();
  options.max_local_prefills_waiting = 2;
  auto created = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options,
                                      std::make_unique<CpuBackend>(model));
  ASSERT_TRUE(created.ok()) << created.status();
  DecodeWorker* decode = created->get();
  const auto prompt = RandomTokens(200, model->config().vocab_size, 4);
  SamplingParams sampling;
  sampling.temperature = 0.7f;
  sampling.seed = 3;
  Stream alone;
  ASSERT_TRUE(decode->PrefillAndDecode(Local(prompt, sampling, 10), alone.Callback()).ok());
  ASSERT_TRUE(alone.WaitFinished());

  // The first job's cancellation check holds the prefill thread until released.
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, released = false;
  auto hold = [&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!entered) {
      entered = true;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });
    }
    return false;
  };
  Stream streams[4];
  Admission admitted[4];
  decode->PrefillAndDecodeAsync(Local(prompt, sampling, 10), streams[0].Callback(), hold,
                                admitted[0].Callback());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return entered; }));
  }
  for (int i = 1; i < 4; ++i) {
    decode->PrefillAndDecodeAsync(Local(prompt, sampling, 10), streams[i].Callback(), nullptr,
                                  admitted[i].Callback());
  }
  ASSERT_EQ(admitted[3].answers.size(), 1u) << "the refusal comes at once";
  EXPECT_EQ(admitted[3].answers[0].status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(admitted[1].answers.empty() && admitted[2].answers.empty());
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(admitted[i].Wait());
    ASSERT_TRUE(admitted[i].answers[0].ok()) << admitted[i].answers[0].status();
    ASSERT_TRUE(streams[i].WaitFinished());
    EXPECT_EQ(streams[i].tokens, alone.tokens) << i;
  }
  EXPECT_TRUE(streams[3].tokens.empty());
  EXPECT_TRUE(BatchEmpties(*decode));

  // Refusals come at once, on the calling thread; a cancelled one before its prefill.
  Admission bad;
  Stream unused;
  decode->PrefillAndDecodeAsync(Local({}, {}, 4), unused.Callback(), nullptr, bad.Callback());
  ASSERT_EQ(bad.answers.size(), 1u);
  EXPECT_EQ(bad.answers[0].status().code(), absl::StatusCode::kInvalidArgument);
  Stream never;
  Admission cancelled;
  decode->PrefillAndDecodeAsync(
      Local(prompt, {}, 4), never.Callback(), [] { return true; }, cancelled.Callback());
  ASSERT_TRUE(cancelled.Wait());
  EXPECT_EQ(cancelled.answers[0].status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(never.tokens.empty());
}

}  // namespace
}  // namespace yoco
