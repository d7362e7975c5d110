// DecodeBatcher: continuously batched decoding gives exactly the tokens of decoding each
// sequence alone (from state bundles, as a decode worker receives them); the batch, the
// memory budget and the queue bound what runs; cancel and stop end sequences and free memory.
#include "lib/batching/decode_batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/state_bundle.h"
#include "tests/batching/decode_event_collector.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

using testing::RandomTokens;

using Collector = testing::DecodeEventCollector;

class DecodeBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeModel(testing::SmallConfig(), 31, "batcher");
    ASSERT_NE(model_, nullptr);
    prefill_backend_ = std::make_unique<CpuBackend>(model_);
    decode_backend_ = std::make_unique<CpuBackend>(model_);
  }

  // What a prefill worker ships: the prompt prefilled, its first token sampled, as bytes.
  Generation Prefilled(int prompt_length, uint32_t seed, SamplingParams sampling, int32_t* first) {
    auto gen = Generation::Prefill(*prefill_backend_,
                                   RandomTokens(prompt_length, model_->config().vocab_size, seed),
                                   sampling, first);
    EXPECT_TRUE(gen.ok());
    const std::string bytes = SerializeStateBundle(gen->ToBundle(model_->fingerprint()));
    auto bundle = ParseStateBundle(bytes, model_->config(), model_->fingerprint());
    EXPECT_TRUE(bundle.ok());
    return *Generation::FromBundle(std::move(*bundle));
  }

  SamplingParams Sampling(uint64_t seed) {
    SamplingParams s;
    s.temperature = 0.8f;
    s.top_k = 40;
    s.seed = seed;
    return s;
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> prefill_backend_, decode_backend_;
};

TEST_F(DecodeBatcherTest, BatchedDecodingEqualsDecodingAlone) {
  constexpr int kSequences = 7, kNew = 12;
  std::vector<std::vector<int32_t>> want(kSequences);
  for (int i = 0; i < kSequences; ++i) {
    int32_t first;
    Generation alone = Prefilled(10 + 37 * i, i, Sampling(100 + i), &first);
    for (int t = 0; t < kNew; ++t) want[i].push_back(*alone.Next(*prefill_backend_));
  }
  DecodeBatcherOptions options;
  options.max_batch = 3;  // seven sequences: some wait in the queue, batches change size
  DecodeBatcher batcher(*decode_backend_, options);
  std::vector<Collector> got(kSequences);
  for (int i = 0; i < kSequences; ++i) {
    int32_t first;
    auto id = batcher.Admit(
        {Prefilled(10 + 37 * i, i, Sampling(100 + i), &first), kNew, false, got[i].Callback()});
    ASSERT_TRUE(id.ok()) << id.status();
  }
  for (int i = 0; i < kSequences; ++i) {
    ASSERT_TRUE(got[i].WaitFinished());
    EXPECT_EQ(got[i].tokens, want[i]) << "sequence " << i;
    EXPECT_EQ(got[i].reason, DecodeFinish::kLength);
  }
  // Stats are published after the finishing step's events.
  for (int i = 0; i < 100 && batcher.stats().active != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const DecodeBatcherStats stats = batcher.stats();
  EXPECT_EQ(stats.active, 0);
  EXPECT_EQ(stats.memory_in_use_bytes, 0);
  EXPECT_LT(stats.steps, static_cast<uint64_t>(kSequences * kNew));  // really batched
}

TEST_F(DecodeBatcherTest, MemoryBudgetQueuesAndQueueLimitRefuses) {
  int32_t first;
  Generation probe = Prefilled(50, 1, Sampling(1), &first);
  const int64_t one = DecodeBatcher::ReservedBytes(model_->config(), probe.state(), 400);
  DecodeBatcherOptions options;
  options.memory_budget_bytes = one + one / 2;  // room for one such sequence at a time
  options.max_queue = 1;
  DecodeBatcher batcher(*decode_backend_, options);
  Collector a, b, c;
  Generation gen_b = Prefilled(50, 2, Sampling(2), &first);
  Generation gen_c = Prefilled(50, 3, Sampling(3), &first);
  ASSERT_TRUE(
      batcher.Admit({Prefilled(50, 1, Sampling(1), &first), 400, false, a.Callback()}).ok());
  while (a.TokenCount() == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // a runs
  ASSERT_TRUE(batcher.Admit({std::move(gen_b), 400, false, b.Callback()}).ok());
  // b waits for memory, filling the queue: c is refused.
  auto refused = batcher.Admit({std::move(gen_c), 400, false, c.Callback()});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  DecodeBatcherStats stats = batcher.stats();
  EXPECT_LE(stats.active, 1);
  EXPECT_LE(stats.memory_in_use_bytes, options.memory_budget_bytes);
  EXPECT_EQ(stats.memory_budget_bytes, options.memory_budget_bytes);
  ASSERT_TRUE(a.WaitFinished());
  ASSERT_TRUE(b.WaitFinished());
  EXPECT_EQ(a.tokens.size(), 400u);
  EXPECT_EQ(b.tokens.size(), 400u);
  // A sequence that could never fit is refused at once, and not as load (no wait would help).
  options.memory_budget_bytes = one / 2;
  DecodeBatcher small(*decode_backend_, options);
  EXPECT_EQ(small.Admit({Prefilled(50, 4, Sampling(4), &first), 400, false, c.Callback()})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      small.Admit({Prefilled(5, 4, Sampling(4), &first), 0, false, c.Callback()}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// Waiting sequences join the batch in FairOrder: a higher priority first, then tenants in turn,
// so b's one request does not wait behind tenant a's backlog.
TEST_F(DecodeBatcherTest, WaitingSequencesJoinByPriorityThenTenantTurns) {
  DecodeBatcherOptions options;
  options.max_batch = 1;
  options.tenant_reserve_seats = 0;  // the order alone
  DecodeBatcher batcher(*decode_backend_, options);
  std::mutex mu;
  std::vector<std::string> started;  // in the order of their first tokens
  std::vector<Collector> done(6);
  auto admit = [&](int i, const std::string& name, int tokens, SchedulingClass scheduling) {
    int32_t first;
    auto on_event = [&, i, name, callback = done[i].Callback()](const DecodeEvent& e) {
      if (!e.finished && e.generated == 1) {
        std::lock_guard<std::mutex> lock(mu);
        started.push_back(name);
      }
      callback(e);
    };
    ASSERT_TRUE(batcher
                    .Admit({Prefilled(20, i, Sampling(i), &first), tokens, false, on_event,
                            std::move(scheduling)})
                    .ok());
  };
  admit(0, "a0", 200, {.tenant = "a"});
  while (done[0].TokenCount() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  admit(1, "a1", 3, {.tenant = "a"});
  admit(2, "a2", 3, {.tenant = "a"});
  admit(3, "a3", 3, {.tenant = "a"});
  admit(4, "b", 3, {.tenant = "b"});
  admit(5, "urgent", 3, {.tenant = "a", .priority = -1});
  for (Collector& c : done) ASSERT_TRUE(c.WaitFinished());
  EXPECT_EQ(started, (std::vector<std::string>{"a0", "urgent", "a1", "b", "a2", "a3"}));
}

// Tenant a fills both seats with long answers; b's request takes a reserve seat and is done
// long before them, while a's third waits for a seat of its own.
TEST_F(DecodeBatcherTest, ATenantWithNoSeatTakesAReserveSeat) {
  DecodeBatcherOptions options;
  options.max_batch = 2;
  options.tenant_reserve_seats = 1;
  DecodeBatcher batcher(*decode_backend_, options);
  std::mutex mu;
  std::vector<std::string> events;  // "+name" at a first token, "-name" at the finish
  std::vector<Collector> done(4);
  auto admit = [&](int i, const std::string& name, int tokens) {
    int32_t first;
    auto on_event = [&, i, name, callback = done[i].Callback()](const DecodeEvent& e) {
      if (e.finished || e.generated == 1) {
        std::lock_guard<std::mutex> lock(mu);
        events.push_back((e.finished ? "-" : "+") + name);
      }
      callback(e);
    };
    SchedulingClass scheduling{.tenant = name.substr(0, 1)};
    ASSERT_TRUE(
        batcher.Admit({Prefilled(20, i, Sampling(i), &first), tokens, false, on_event, scheduling})
            .ok());
  };
  admit(0, "a0", 150);
  admit(1, "a1", 150);
  while (done[1].TokenCount() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  admit(2, "a2", 3);
  admit(3, "b3", 3);
  for (Collector& c : done) ASSERT_TRUE(c.WaitFinished());
  auto at = [&](const std::string& event) {
    return std::find(events.begin(), events.end(), event) - events.begin();
  };
  EXPECT_LT(at("-b3"), at("-a0"));  // b did not wait for a seat to free
  EXPECT_LT(at("-a0"), at("+a2"));  // a's third did
  EXPECT_EQ(done[3].tokens.size(), 3u);
}

// MaxSequenceRows (what decode workers report to the router, which refuses longer requests
// before any work) is exactly the longest sequence Admit takes in that budget.
TEST_F(DecodeBatcherTest, MaxSequenceRowsIsTheLongestSequenceAdmitted) {
  int32_t first = 0;
  Collector c;
  DecodeBatcherOptions options;
  options.memory_budget_bytes = 600 * 1024 + 123;
  const int64_t rows =
      DecodeBatcher::MaxSequenceRows(model_->config(), options.memory_budget_bytes);
  ASSERT_GT(rows, 60);
  DecodeBatcher batcher(*decode_backend_, options);
  const int fits = static_cast<int>(rows - 50);
  auto longest = batcher.Admit({Prefilled(50, 1, Sampling(1), &first), fits, false, c.Callback()});
  EXPECT_TRUE(longest.ok()) << longest.status();
  batcher.Cancel(*longest);
  EXPECT_EQ(batcher.Admit({Prefilled(50, 1, Sampling(1), &first), fits + 1, false, c.Callback()})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DecodeBatcher::MaxSequenceRows(model_->config(), 1000), 0) << "not even the states";
}

// Questions on one document share its K/V chunks, and the budget charges them for it once:
// eight sequences from one 1280-token state run together within a budget that, charging each
// its own copy, would hold fewer than four, and each gives the tokens of the state decoded
// alone.
TEST_F(DecodeBatcherTest, SequencesSharingChunksAreChargedForThemOnce) {
  int32_t first;
  const Generation shared = Prefilled(1280, 5, Sampling(5), &first);  // ten full chunks
  const int64_t one = DecodeBatcher::ReservedBytes(model_->config(), shared.state(), 30);
  const int64_t chunks = 2 * 10 * KvRows::kChunkRows * model_->config().kv_dim() * 4;
  DecodeBatcherOptions options;
  options.memory_budget_bytes = one + 7 * (one - chunks) + chunks / 2;
  ASSERT_LT(options.memory_budget_bytes, 4 * one);
  Collector alone;
  {
    DecodeBatcher batcher(*decode_backend_, options);
    ASSERT_TRUE(batcher.Admit({shared, 30, false, alone.Callback()}).ok());
    ASSERT_TRUE(alone.WaitFinished());
  }
  DecodeBatcher batcher(*decode_backend_, options);
  std::vector<Collector> questions(8);
  for (Collector& q : questions) {
    ASSERT_TRUE(batcher.Admit({shared, 30, false, q.Callback()}).ok());
  }
  for (Collector& q : questions) {
    ASSERT_TRUE(q.WaitFinished());
    EXPECT_EQ(q.tokens, alone.tokens);
  }
  // Together they took about the 30 steps of one sequence; charged a copy each, at most three
  // at a time, they would have taken at least 90.
  EXPECT_LT(batcher.stats().steps, 60u);
  // Published after the last finish event: wait for it.
  for (int i = 0; i < 5000 && batcher.stats().memory_in_use_bytes != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(batcher.stats().memory_in_use_bytes, 0);
}

// A request's choices go in under one id: each emits what its sequence alone emits (a replayed
// one only what follows its replay), one Cancel ends them all, queued or running, and a
// refusal admits none.
TEST_F(DecodeBatcherTest, ChoicesRunAsTheirSequencesAloneAndCancelTogether) {
  int32_t first;
  const Generation shared = Prefilled(300, 9, Sampling(9), &first);
  auto choice = [&](uint64_t seed, std::vector<int32_t> replay) {
    Generation g = shared;
    SamplingParams s = Sampling(seed);
    g.set_sampling(s);
    g.set_replay(std::move(replay));
    return g;
  };
  // Alone: 20 tokens of seed 2; the choice replays that run's first 6 and asks for 14 more.
  Generation alone = choice(2, {});
  std::vector<int32_t> run;
  for (int t = 0; t < 20; ++t) run.push_back(*alone.Next(*prefill_backend_));
  Generation other = choice(3, {});
  std::vector<int32_t> other_run;
  for (int t = 0; t < 10; ++t) other_run.push_back(*other.Next(*prefill_backend_));

  DecodeBatcherOptions options;
  options.max_batch = 1;  // the second choice waits in the queue while the first runs
  DecodeBatcher batcher(*decode_backend_, options);
  Collector replayed, fresh;
  std::vector<DecodeSequence> choices;
  choices.push_back({choice(2, {run.begin(), run.begin() + 6}), 14, false, replayed.Callback()});
  choices.push_back({choice(3, {}), 10, false, fresh.Callback()});
  ASSERT_TRUE(batcher.AdmitChoices(std::move(choices)).ok());
  ASSERT_TRUE(replayed.WaitFinished());
  ASSERT_TRUE(fresh.WaitFinished());
  EXPECT_EQ(replayed.tokens, std::vector<int32_t>(run.begin() + 6, run.end()));
  EXPECT_EQ(replayed.generated.back(), 14);
  EXPECT_EQ(fresh.tokens, other_run);

  Collector a, b;
  choices.clear();
  choices.push_back({choice(4, {}), 1000000, false, a.Callback()});
  choices.push_back({choice(5, {}), 1000000, false, b.Callback()});
  absl::StatusOr<uint64_t> id = batcher.AdmitChoices(std::move(choices));
  ASSERT_TRUE(id.ok());
  while (a.TokenCount() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  batcher.Cancel(*id);
  ASSERT_TRUE(a.WaitFinished());
  ASSERT_TRUE(b.WaitFinished());  // still queued behind a
  EXPECT_EQ(a.reason, DecodeFinish::kCancelled);
  EXPECT_EQ(b.reason, DecodeFinish::kCancelled);
  EXPECT_TRUE(b.tokens.empty());

  Collector never;
  choices.clear();
  choices.push_back({choice(6, {}), 5, false, never.Callback()});
  choices.push_back({choice(7, {}), 0, false, never.Callback()});
  EXPECT_EQ(batcher.AdmitChoices(std::move(choices)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(never.TokenCount(), 0u);
}

// One choice ends alone (a stop string the router saw): running or queued, it finishes
// kCancelled and the others go on to their own ends with the tokens they have alone; a choice
// the request does not have, or an id that is not the request's, cancels nothing.
TEST_F(DecodeBatcherTest, OneChoiceCancelsAloneRunningOrQueued) {
  int32_t first;
  const Generation shared = Prefilled(200, 11, Sampling(11), &first);
  auto choice = [&](uint64_t seed) {
    Generation g = shared;
    g.set_sampling(Sampling(seed));
    return g;
  };
  Generation alone = choice(13);
  std::vector<int32_t> run;
  for (int t = 0; t < 12; ++t) run.push_back(*alone.Next(*prefill_backend_));

  DecodeBatcherOptions options;
  options.max_batch = 2;  // the third choice waits in the queue
  DecodeBatcher batcher(*decode_backend_, options);
  Collector running, goes_on, queued;
  std::vector<DecodeSequence> choices;
  // Choices 5, 2 and 7 (a request's choice numbers need not be its positions).
  choices.push_back({choice(12), 1000000, false, running.Callback(), {}, 5});
  choices.push_back({choice(13), 12, false, goes_on.Callback(), {}, 2});
  choices.push_back({choice(14), 1000000, false, queued.Callback(), {}, 7});
  absl::StatusOr<uint64_t> id = batcher.AdmitChoices(std::move(choices));
  ASSERT_TRUE(id.ok());
  while (running.TokenCount() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  batcher.CancelChoice(*id, 1);      // no such choice
  batcher.CancelChoice(*id + 1, 2);  // not the request's id
  batcher.CancelChoice(*id, 7);      // queued
  batcher.CancelChoice(*id, 5);      // running
  ASSERT_TRUE(running.WaitFinished());
  ASSERT_TRUE(queued.WaitFinished());
  EXPECT_EQ(running.reason, DecodeFinish::kCancelled);
  EXPECT_EQ(queued.reason, DecodeFinish::kCancelled);
  EXPECT_TRUE(queued.tokens.empty());
  ASSERT_TRUE(goes_on.WaitFinished());
  EXPECT_EQ(goes_on.reason, DecodeFinish::kLength);
  EXPECT_EQ(goes_on.tokens, run);
  for (int i = 0; i < 5000 && batcher.stats().memory_in_use_bytes != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(batcher.stats().memory_in_use_bytes, 0);
}

TEST_F(DecodeBatcherTest, CancelAndStopEndSequencesAndFreeMemory) {
  DecodeBatcher batcher(*decode_backend_, {});
  int32_t first;
  Collector runaway;
  auto id =
      batcher.Admit({Prefilled(20, 5, Sampling(5), &first), 1000000, false, runaway.Callback()});
  ASSERT_TRUE(id.ok());
  while (runaway.TokenCount() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  batcher.Cancel(*id);
  ASSERT_TRUE(runaway.WaitFinished());
  EXPECT_EQ(runaway.reason, DecodeFinish::kCancelled);

  // Stop at the third token of a greedy run.
  SamplingParams greedy;
  Generation alone = Prefilled(30, 6, greedy, &first);
  std::vector<int32_t> reference;
  for (int t = 0; t < 3; ++t) reference.push_back(*alone.Next(*prefill_backend_));
  greedy.stop_token_ids = {reference[2]};
  Collector stopped;
  ASSERT_TRUE(
      batcher.Admit({Prefilled(30, 6, greedy, &first), 50, false, stopped.Callback()}).ok());
  ASSERT_TRUE(stopped.WaitFinished());
  EXPECT_EQ(stopped.reason, DecodeFinish::kStop);
  ASSERT_FALSE(stopped.tokens.empty());
  EXPECT_EQ(stopped.tokens.back(), reference[2]);
  EXPECT_LE(stopped.tokens.size(), 3u);

  for (int i = 0; i < 100 && batcher.stats().memory_in_use_bytes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(batcher.stats().memory_in_use_bytes, 0);
  EXPECT_EQ(batcher.stats().active, 0);
}

TEST_F(DecodeBatcherTest, ShutdownCancelsEverything) {
  Collector a, b;
  {
    DecodeBatcherOptions options;
    options.max_batch = 1;
    DecodeBatcher batcher(*decode_backend_, options);
    int32_t first;
    ASSERT_TRUE(
        batcher.Admit({Prefilled(20, 7, Sampling(7), &first), 1000000, false, a.Callback()}).ok());
    ASSERT_TRUE(
        batcher.Admit({Prefilled(20, 8, Sampling(8), &first), 1000000, false, b.Callback()}).ok());
    while (a.TokenCount() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(a.finished && b.finished);
  EXPECT_EQ(a.reason, DecodeFinish::kCancelled);
  EXPECT_EQ(b.reason, DecodeFinish::kCancelled);
}

}  // namespace
}  // namespace yoco
