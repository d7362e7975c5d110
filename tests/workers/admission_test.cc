// What a worker admits, and what its readiness says about it: a prefill worker queues prefills
// in order up to its bound and refuses the next at once with RESOURCE_EXHAUSTED; a decode
// worker cannot admit once its state memory cannot hold one more sequence like those running,
// and can again when they end.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "lib/cache/block_key.h"
#include "lib/engine/cpu_backend.h"
#include "lib/scheduling/scheduling_class.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/decode_worker.h"
#include "lib/workers/prefill_worker.h"
#include "tests/batching/decode_event_collector.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

using testing::RandomTokens;

UcxTransportOptions Loopback() { return BundleTransportOptions("tcp", "lo"); }

void WaitUntil(const std::function<bool()>& done) {
  for (int i = 0; i < 2000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

TEST(AdmissionTest, PrefillsBeyondTheQueueBoundAreRefusedAtOnce) {
  auto model = testing::MakeModel(testing::SmallConfig(), 71, "prefill_queue");
  ASSERT_NE(model, nullptr);
  PrefillWorkerOptions options;
  options.max_waiting = 1;
  auto worker = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback(), options);
  ASSERT_TRUE(worker.ok()) << worker.status();
  PrefillWorker& w = **worker;

  // The first prefill holds the engine until released (its cancellation poll blocks).
  std::atomic<bool> release{false}, holding{false};
  auto call = [&](uint32_t seed) {
    PrefillCall c;
    c.prompt = RandomTokens(40, model->config().vocab_size, seed);
    c.max_new_tokens = 1;  // ends on its first token: nothing to ship
    return c;
  };
  PrefillCall first = call(1);
  first.cancelled = [&] {
    holding = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return false;
  };
  std::thread a([&] { EXPECT_TRUE(w.Prefill(first).ok()); });
  WaitUntil([&] { return holding.load(); });
  std::thread b([&] { EXPECT_TRUE(w.Prefill(call(2)).ok()); });  // waits, in line
  WaitUntil([&] { return w.engine_waiting() == 1; });
  EXPECT_TRUE(w.engine_queue_full());

  const auto start = std::chrono::steady_clock::now();
  auto refused = w.Prefill(call(3));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(w.engine_refused(), 1u);

  release = true;
  a.join();
  b.join();
  EXPECT_FALSE(w.engine_queue_full());
  EXPECT_TRUE(w.Prefill(call(4)).ok());
}

// A pre-cache of `blocks` blocks and class `holder` holds the engine; a request of class `waiter`
// queues after its first block boundary. With `hands_over` the request runs at the pre-cache's next
// block boundary, not after the whole document; else after it. Either way the document's snapshot
// is the same as an uninterrupted one's: a question on it gives the first token of an uncached
// prefill.
void ExpectARequestRunsBetweenThePrecachesBlocks(const SchedulingClass& holder,
                                                 const SchedulingClass& waiter, int64_t blocks,
                                                 bool hands_over) {
  auto model = testing::MakeModel(testing::SmallConfig(), 73, "precache_yields");
  ASSERT_NE(model, nullptr);
  PrefillWorkerOptions options;
  options.cache_budget_bytes = int64_t{64} << 20;
  auto worker = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback(), options);
  ASSERT_TRUE(worker.ok()) << worker.status();
  PrefillWorker& w = **worker;
  const int vocab = model->config().vocab_size;
  const std::vector<int32_t> document = RandomTokens(blocks * kCacheBlockTokens, vocab, 5);

  // The pre-cache's cancellation poll (before each block) holds it after its first block until
  // the request waits for the engine.
  std::atomic<int> polls{0};
  std::atomic<bool> precache_done{false}, request_done_first{false};
  auto poll = [&] {
    if (++polls == 2) WaitUntil([&] { return w.engine_waiting() == 1; });
    return false;
  };
  std::thread background([&] {
    // Done once its last block is (the engine still held): set after Precache returned, the
    // request, run as soon as the turn was released, could end first.
    auto progress = [&](int64_t tokens_done) {
      if (tokens_done == static_cast<int64_t>(document.size())) precache_done = true;
    };
    auto done = w.Precache(document, "", SnapshotRetention{}, poll, progress, holder);
    EXPECT_TRUE(done.ok()) << done.status();
  });
  WaitUntil([&] { return polls.load() >= 2; });
  PrefillCall request;
  request.prompt = RandomTokens(40, vocab, 6);
  request.max_new_tokens = 1;
  request.scheduling = waiter;
  EXPECT_TRUE(w.Prefill(request).ok());
  request_done_first = !precache_done;
  background.join();
  EXPECT_EQ(request_done_first, hands_over);
  EXPECT_EQ(w.engine_yields(), hands_over ? 1u : 0u);

  PrefillCall question;
  question.prompt = document;
  question.prompt.push_back(7);
  question.max_new_tokens = 1;
  auto hit = w.Prefill(question);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->cached_tokens, blocks * kCacheBlockTokens);
  auto fresh = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto miss = (*fresh)->Prefill(question);
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_EQ(miss->cached_tokens, 0);
  EXPECT_EQ(hit->first_token, miss->first_token);
}

// The router's conversation snapshots run at background priority, behind its tenant's requests,
// however little of them is left.
TEST(AdmissionTest, ABackgroundPrecacheHandsTheEngineToARequestBetweenBlocks) {
  ExpectARequestRunsBetweenThePrecachesBlocks({.tenant = "t", .priority = kBackgroundPriority},
                                              {.tenant = "t", .priority = 0}, 4, true);
}

// At one priority, one tenant's long document and another tenant's request take turns by block;
// one that has 512 tokens or fewer left at the boundary after the request came (its second)
// finishes first.
TEST(AdmissionTest, ALongPrefillHandsTheEngineToAnotherTenantBetweenBlocks) {
  ExpectARequestRunsBetweenThePrecachesBlocks({.tenant = "documents"}, {.tenant = "chat"}, 7, true);
  ExpectARequestRunsBetweenThePrecachesBlocks({.tenant = "documents"}, {.tenant = "chat"}, 6,
                                              false);
}

TEST(AdmissionTest, DecodeWorkerCannotAdmitWhenStateMemoryIsTaken) {
  auto model = testing::MakeModel(testing::SmallConfig(), 72, "decode_admit");
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  auto prefill = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback());
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  constexpr int kMaxNew = 100000;  // runs until cancelled

  auto start_sequence = [&](DecodeWorker& decode, uint32_t seed,
                            testing::DecodeEventCollector& stream) -> uint64_t {
    PrefillCall c;
    c.prompt = RandomTokens(64, vocab, seed);
    c.decode_address = decode.address();
    c.transfer_timeout = absl::Seconds(20);
    auto shipped = (*prefill)->Prefill(c);
    EXPECT_TRUE(shipped.ok()) << shipped.status();
    if (!shipped.ok()) return 0;
    auto id = decode.Decode({.sender = shipped->sender,
                             .transfer_id = shipped->transfer_id,
                             .max_new_tokens = kMaxNew,
                             .wait = absl::Seconds(10)},
                            stream.Callback());
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  };

  // One running sequence's reservation, measured.
  int64_t one = 0;
  {
    DecodeWorkerOptions options;
    options.transport = Loopback();
    auto probe = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options);
    ASSERT_TRUE(probe.ok()) << probe.status();
    testing::DecodeEventCollector stream;
    const uint64_t id = start_sequence(**probe, 1, stream);
    WaitUntil([&] { return (*probe)->stats().active == 1; });
    one = (*probe)->stats().memory_in_use_bytes;
    (*probe)->Cancel(id);
    ASSERT_TRUE(stream.WaitFinished());
  }
  ASSERT_GT(one, 0);

  DecodeWorkerOptions options;
  options.transport = Loopback();
  options.batcher.memory_budget_bytes = 2 * one + one / 2;  // two fit, a third would not
  auto decode = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options);
  ASSERT_TRUE(decode.ok()) << decode.status();
  DecodeWorker& d = **decode;
  EXPECT_TRUE(d.CanAdmit());
  testing::DecodeEventCollector s1, s2;
  const uint64_t id1 = start_sequence(d, 2, s1);
  WaitUntil([&] { return d.stats().active == 1; });
  EXPECT_TRUE(d.CanAdmit());  // 1.5 sequences left
  const uint64_t id2 = start_sequence(d, 3, s2);
  WaitUntil([&] { return d.stats().active == 2; });
  EXPECT_FALSE(d.CanAdmit());  // half a sequence left
  d.Cancel(id2);
  ASSERT_TRUE(s2.WaitFinished());
  WaitUntil([&] { return d.CanAdmit(); });
  EXPECT_TRUE(d.CanAdmit());
  d.Cancel(id1);
  ASSERT_TRUE(s1.WaitFinished());
}

}  // namespace
}  // namespace yoco
