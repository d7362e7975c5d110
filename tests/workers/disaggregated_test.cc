// Disaggregated serving at the library level: a prefill worker ships each request's bundle
// over UCX (loopback TCP) to a decode worker that batches; the tokens equal the in-process
// engine's for every request. A bundle from another model is refused back to the prefill side.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/decode_worker.h"
#include "lib/workers/prefill_worker.h"
#include "tests/batching/decode_event_collector.h"
#include "tests/cache/snapshot_test_states.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

PrefillCall Call(std::vector<int32_t> prompt, SamplingParams sampling, std::string address) {
  PrefillCall call;
  call.prompt = std::move(prompt);
  call.sampling = std::move(sampling);
  call.decode_address = std::move(address);
  call.transfer_timeout = absl::Seconds(20);
  return call;
}

using testing::RandomTokens;

using Stream = testing::DecodeEventCollector;

UcxTransportOptions Loopback() { return BundleTransportOptions("tcp", "lo"); }

// A prefill worker on loopback UCX with a prefix cache of `cache_bytes` (none at 0).
absl::StatusOr<std::unique_ptr<PrefillWorker>> StartPrefill(std::shared_ptr<const Model> model,
                                                            int64_t cache_bytes = 0) {
  PrefillWorkerOptions options;
  options.cache_budget_bytes = cache_bytes;
  return PrefillWorker::Create(std::make_unique<CpuBackend>(std::move(model)), Loopback(), options);
}

// A decode worker on loopback UCX batching up to `max_batch` sequences (0: the default).
absl::StatusOr<std::unique_ptr<DecodeWorker>> StartDecode(std::shared_ptr<const Model> model,
                                                          int max_batch = 0) {
  DecodeWorkerOptions options;
  options.transport = Loopback();
  if (max_batch > 0) options.batcher.max_batch = max_batch;
  return DecodeWorker::Create(std::make_unique<CpuBackend>(std::move(model)), options);
}

TEST(DisaggregatedTest, PrefillToDecodeOverUcxGivesTheInProcessTokens) {
  auto model = testing::MakeModel(testing::SmallConfig(), 41, "disaggregated");
  ASSERT_NE(model, nullptr);
  auto prefill = StartPrefill(model);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = StartDecode(model, /*max_batch=*/4);
  ASSERT_TRUE(decode.ok()) << decode.status();
  CpuBackend local(model);

  constexpr int kRequests = 6, kNew = 10;
  std::vector<Stream> streams(kRequests);
  std::vector<std::vector<int32_t>> want(kRequests), first(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    SamplingParams sampling;
    sampling.temperature = i % 2 ? 0.9f : 0.0f;
    sampling.seed = 7 + i;
    const auto prompt =
        RandomTokens(20 + 60 * i, model->config().vocab_size, 50 + i);  // up to 320 > 256
    GenerateOptions reference{kNew + 1, sampling, false};
    want[i] = *Generate(local, prompt, reference);

    auto shipped = (*prefill)->Prefill(Call(prompt, sampling, (*decode)->address()));
    ASSERT_TRUE(shipped.ok()) << shipped.status();
    first[i] = {shipped->first_token};
    auto id = (*decode)->Decode({.sender = shipped->sender,
                                 .transfer_id = shipped->transfer_id,
                                 .max_new_tokens = kNew,
                                 .wait = absl::Seconds(10)},
                                streams[i].Callback());
    ASSERT_TRUE(id.ok()) << id.status();
  }
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(streams[i].WaitFinished());
    std::vector<int32_t> got = first[i];
    got.insert(got.end(), streams[i].tokens.begin(), streams[i].tokens.end());
    EXPECT_EQ(got, want[i]) << "request " << i;
  }
  EXPECT_EQ((*decode)->waiting_bundles(), 0u);
  EXPECT_EQ((*decode)->transfer_metrics().transfers_received, static_cast<uint64_t>(kRequests));

  // A decode call whose bundle never comes times out cleanly.
  Stream never;
  EXPECT_EQ(
      (*decode)
          ->Decode(
              {.sender = 1, .transfer_id = 2, .max_new_tokens = 5, .wait = absl::Milliseconds(50)},
              never.Callback())
          .status()
          .code(),
      absl::StatusCode::kDeadlineExceeded);
}

// A caller that streams the first token (PrefillStream) is told it once the prefill has it and
// before the bundle goes: the decode worker has received nothing yet. A request that ends on its
// first token ships nothing and is told nothing early.
TEST(DisaggregatedTest, TheFirstTokenIsToldBeforeTheBundleShips) {
  auto model = testing::MakeModel(testing::SmallConfig(), 44, "first_token_early");
  ASSERT_NE(model, nullptr);
  auto prefill = StartPrefill(model);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = StartDecode(model);
  ASSERT_TRUE(decode.ok()) << decode.status();

  SamplingParams sampling;
  sampling.logprobs = 2;
  PrefillCall call =
      Call(RandomTokens(300, model->config().vocab_size, 5), sampling, (*decode)->address());
  call.max_new_tokens = 8;
  std::vector<PrefillResult> told;
  uint64_t received_when_told = 1;
  call.on_first_token = [&](const PrefillResult& first) {
    told.push_back(first);
    received_when_told = (*decode)->transfer_metrics().transfers_received;
  };
  auto shipped = (*prefill)->Prefill(call);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_TRUE(shipped->shipped);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(received_when_told, 0u);
  EXPECT_EQ(told[0].first_token, shipped->first_token);
  ASSERT_TRUE(told[0].first_logprobs.has_value());
  EXPECT_EQ(told[0].first_logprobs, shipped->first_logprobs);
  EXPECT_EQ(told[0].transfer_id, 0u);  // nothing had gone
  EXPECT_EQ((*decode)->transfer_metrics().transfers_received, 1u);

  call.max_new_tokens = 1;
  told.clear();
  auto ended = (*prefill)->Prefill(call);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_FALSE(ended->shipped);
  EXPECT_TRUE(told.empty());
}

TEST(DisaggregatedTest, BundleFromAnotherModelIsRefused) {
  auto ours = testing::MakeModel(testing::SmallConfig(), 42, "refuse_ours");
  auto theirs = testing::MakeModel(testing::SmallConfig(), 43, "refuse_theirs");
  ASSERT_TRUE(ours && theirs);
  auto prefill = StartPrefill(theirs);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = StartDecode(ours);
  ASSERT_TRUE(decode.ok());
  auto shipped = (*prefill)->Prefill(
      Call(RandomTokens(30, ours->config().vocab_size, 1), {}, (*decode)->address()));
  EXPECT_EQ(shipped.status().code(), absl::StatusCode::kFailedPrecondition) << shipped.status();
  EXPECT_EQ((*decode)->waiting_bundles(), 0u);
}

// A prompt no generation could hold is refused before the engine turn and any prefill work,
// naming the prompt's own length (it used to fail mid-prefill with a segment's end position).
TEST(DisaggregatedTest, PromptBeyondMaxSeqLenIsRefusedBeforeAnyWork) {
  ModelConfig config = testing::SmallConfig();
  config.max_seq_len = 300;
  auto model = testing::MakeModel(config, 47, "max_seq_len");
  ASSERT_NE(model, nullptr);
  auto prefill = StartPrefill(model, 16 << 20);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const auto prompt = RandomTokens(301, config.vocab_size, 3);
  auto shipped = (*prefill)->Prefill(Call(prompt, {}, "unused: refused first"));
  EXPECT_EQ(shipped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shipped.status().message(),
            "the prompt has 301 tokens; the model's max_seq_len is 300");
  auto precached = (*prefill)->Precache(prompt, "", {}, nullptr);
  EXPECT_EQ(precached.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*prefill)->cache()->stats().lookups, 0u);  // never reached the cache
}

TEST(DisaggregatedTest, PrefixCacheHitStreamsTheTokensOfAMiss) {
  auto model = testing::MakeModel(testing::SmallConfig(), 44, "cache_hit");
  ASSERT_TRUE(model);
  CpuBackend local(model);
  auto prefill = StartPrefill(model, 64 << 20);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = StartDecode(model);
  ASSERT_TRUE(decode.ok());

  const int vocab = model->config().vocab_size;
  const auto document = RandomTokens(300, vocab, 60);
  SnapshotRetention pin;
  pin.pinned = true;
  std::vector<int64_t> progress;
  auto precached = (*prefill)->Precache(document, "", pin, nullptr,
                                        [&](int64_t done) { progress.push_back(done); });
  ASSERT_TRUE(precached.ok()) << precached.status();
  EXPECT_EQ(progress, (std::vector<int64_t>{128, 256, 300})) << "after every segment";
  EXPECT_EQ(precached->tokens, 300);
  EXPECT_EQ(precached->snapshot.tokens, 256);
  EXPECT_TRUE(precached->snapshot.pinned);
  EXPECT_EQ((*prefill)->Precache(RandomTokens(100, vocab, 61), "", pin, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A longer document starting with this one: its progress starts past the restored prefix.
  auto longer = document;
  const auto more = RandomTokens(200, vocab, 62);
  longer.insert(longer.end(), more.begin() + 1, more.end());
  progress.clear();
  ASSERT_TRUE(
      (*prefill)
          ->Precache(longer, "", {}, nullptr, [&](int64_t done) { progress.push_back(done); })
          .ok());
  EXPECT_EQ(progress, (std::vector<int64_t>{384, 499}));

  for (uint32_t q = 0; q < 2; ++q) {
    auto prompt = document;
    const auto question = RandomTokens(30, vocab, 70 + q);
    prompt.insert(prompt.end(), question.begin() + 1, question.end());
    SamplingParams sampling;
    sampling.temperature = q == 0 ? 0.0f : 0.8f;
    sampling.seed = 5;
    const auto want = *Generate(local, prompt, {9, sampling, false});

    auto shipped = (*prefill)->Prefill(Call(prompt, sampling, (*decode)->address()));
    ASSERT_TRUE(shipped.ok()) << shipped.status();
    EXPECT_EQ(shipped->cached_tokens, 256);
    EXPECT_EQ(shipped->cache_tier, CacheTier::kMemory);
    Stream stream;
    auto id = (*decode)->Decode({.sender = shipped->sender,
                                 .transfer_id = shipped->transfer_id,
                                 .max_new_tokens = 8,
                                 .wait = absl::Seconds(10)},
                                stream.Callback());
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(stream.WaitFinished());
    std::vector<int32_t> got = {shipped->first_token};
    got.insert(got.end(), stream.tokens.begin(), stream.tokens.end());
    EXPECT_EQ(got, want) << "question " << q;
  }
}

// Prefills `prompt` on `prefill` with `sampling`, decodes `decode_tokens` more on `decode`:
// every token, and the prefill's result in *result.
std::vector<int32_t> ServeShipped(PrefillWorker& prefill, DecodeWorker& decode,
                                  const std::vector<int32_t>& prompt,
                                  const SamplingParams& sampling, int decode_tokens,
                                  PrefillResult* result) {
  auto shipped = prefill.Prefill(Call(prompt, sampling, decode.address()));
  EXPECT_TRUE(shipped.ok()) << shipped.status();
  if (!shipped.ok()) return {};
  *result = *shipped;
  Stream stream;
  EXPECT_TRUE(decode
                  .Decode({.sender = shipped->sender,
                           .transfer_id = shipped->transfer_id,
                           .max_new_tokens = decode_tokens,
                           .wait = absl::Seconds(10)},
                          stream.Callback())
                  .ok());
  EXPECT_TRUE(stream.WaitFinished());
  std::vector<int32_t> got = {shipped->first_token};
  got.insert(got.end(), stream.tokens.begin(), stream.tokens.end());
  return got;
}

// `context` followed by a question: `tokens` random tokens seeded by `seed`, less the first.
std::vector<int32_t> WithQuestion(std::vector<int32_t> context, int tokens, uint32_t seed,
                                  int vocab) {
  const auto question = RandomTokens(tokens, vocab, seed);
  context.insert(context.end(), question.begin() + 1, question.end());
  return context;
}

// Serves `prompt` shipped, greedy for an even `seed` and sampled with it otherwise, checks its 7
// tokens against the in-process engine and returns the prefill's result.
PrefillResult ServeAsEngine(PrefillWorker& prefill, DecodeWorker& decode, CpuBackend& local,
                            const std::vector<int32_t>& prompt, uint32_t seed) {
  SamplingParams sampling;
  sampling.temperature = seed % 2 == 0 ? 0.0f : 0.8f;
  sampling.seed = seed;
  const auto want = *Generate(local, prompt, {7, sampling, false});
  PrefillResult shipped;
  EXPECT_EQ(ServeShipped(prefill, decode, prompt, sampling, 6, &shipped), want)
      << "question " << seed;
  return shipped;
}

// The same with greedy sampling and 5 decoded tokens: the 6 tokens and the number of prompt
// tokens that came from the cache.
std::pair<std::vector<int32_t>, int64_t> Serve(PrefillWorker& prefill, DecodeWorker& decode,
                                               const std::vector<int32_t>& prompt) {
  PrefillResult result;
  std::vector<int32_t> got = ServeShipped(prefill, decode, prompt, {}, 5, &result);
  return {got, result.cached_tokens};
}

// A decode worker keeps a document's K/V chunks after the question that brought them: the next
// question on the document ships only its own rows, and when the decode worker has let the
// chunks go (its budget), the bundle is refused and sent whole. The tokens are those of the
// in-process engine every time.
TEST(DisaggregatedTest, ResidentDocumentIsNotShippedAgain) {
  auto model = testing::MakeModel(testing::SmallConfig(), 49, "resident_kv");
  ASSERT_TRUE(model);
  CpuBackend local(model);
  auto prefill = StartPrefill(model, 64 << 20);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  DecodeWorkerOptions options;
  options.transport = Loopback();
  options.resident_kv_budget_bytes = 1;  // idle chunks go as soon as another bundle arrives
  auto decode = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options);
  ASSERT_TRUE(decode.ok()) << decode.status();

  const int vocab = model->config().vocab_size;
  const auto document = RandomTokens(1000, vocab, 80);  // 7 full chunks
  auto ask = [&](const std::vector<int32_t>& context, uint32_t seed) {
    return ServeAsEngine(**prefill, **decode, local, WithQuestion(context, 30, seed, vocab), seed);
  };

  const PrefillResult first = ask(document, 1);
  EXPECT_EQ(first.resident_chunks, 0);
  const PrefillResult second = ask(document, 2);
  EXPECT_EQ(second.resident_chunks, 7);
  const int64_t chunk_rows_bytes = 2 * KvRows::kChunkRows * model->config().kv_dim() * 4;
  EXPECT_EQ(first.bundle_bytes - second.bundle_bytes, 7 * chunk_rows_bytes);
  EXPECT_EQ((*decode)->resident_kv_stats().attached, 7u);

  // Another document's bundle makes the first one's idle chunks go; the prefill worker does not
  // know, so its next bundle on the first document is refused and then sent whole.
  ask(RandomTokens(1000, vocab, 81), 3);
  const PrefillResult again = ask(document, 4);
  EXPECT_EQ(again.resident_chunks, 0);
  EXPECT_EQ(again.bundle_bytes, first.bundle_bytes);
  EXPECT_EQ((*decode)->resident_kv_stats().missing, 1u);
  // And the worker learnt it: the next question leaves the document out again.
  EXPECT_EQ(ask(document, 5).resident_chunks, 7);
}

// A long bundle goes as parts ahead of the rest (here parts of 3 chunks), most of them while the
// prompt is still being prefilled: the tokens are the engine's, with the document's chunks
// resident in front of the parts too, and a decode worker holds no part once its bundle is
// admitted.
TEST(DisaggregatedTest, LongBundlesShipInPartsAndGiveTheEngineTokens) {
  auto model = testing::MakeModel(testing::SmallConfig(), 53, "bundle_parts");
  ASSERT_TRUE(model);
  CpuBackend local(model);
  const int64_t row_bytes = 2 * model->config().kv_dim() * 4;
  PrefillWorkerOptions prefill_options;
  prefill_options.cache_budget_bytes = 64 << 20;
  prefill_options.bundle_part_bytes = 3 * KvRows::kChunkRows * row_bytes;
  auto prefill =
      PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback(), prefill_options);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = StartDecode(model);
  ASSERT_TRUE(decode.ok()) << decode.status();

  const int vocab = model->config().vocab_size;
  const auto document = RandomTokens(1000, vocab, 82);  // 7 full chunks
  auto ask = [&](const std::vector<int32_t>& prompt, uint32_t seed) {
    const PrefillResult shipped = ServeAsEngine(**prefill, **decode, local, prompt, seed);
    EXPECT_EQ((*decode)->waiting_bundle_bytes(), 0) << "question " << seed;
    return shipped;
  };
  auto with_question = [&](const std::vector<int32_t>& context, int tokens, uint32_t seed) {
    return WithQuestion(context, tokens, seed, vocab);
  };

  // 1028 rows: 8 whole chunks in parts of 3, 3 and 2, 4 rows in the bundle.
  const PrefillResult first = ask(with_question(document, 29, 1), 1);
  EXPECT_EQ(first.bundle_parts, 3);
  EXPECT_EQ(first.early_parts, 2);  // at the prefill's boundaries 384 and 768
  EXPECT_EQ(first.resident_chunks, 0);
  // The document is resident: 132 rows left, fewer than a part's worth, go whole.
  const PrefillResult second = ask(with_question(document, 133, 2), 2);
  EXPECT_EQ(second.resident_chunks, 7);
  EXPECT_EQ(second.bundle_parts, 0);
  // A long question on it: the parts start after the 7 resident chunks.
  const PrefillResult third = ask(with_question(document, 700, 3), 3);
  EXPECT_EQ(third.resident_chunks, 7);
  EXPECT_EQ(third.bundle_parts, 2);
  EXPECT_EQ(third.early_parts, 2);  // prefilled from the cached 1024 rows on
  EXPECT_LT(third.bundle_bytes, first.bundle_bytes);
}

// Bundles are serialised and received in memory the workers keep (touched at start with
// prefault): after the start, no bundle allocates, and every one gives the engine's tokens.
TEST(DisaggregatedTest, PrefaultedWorkersShipEveryBundleInTheSameMemory) {
  auto model = testing::MakeModel(testing::SmallConfig(), 52, "warm_buffers");
  ASSERT_TRUE(model);
  CpuBackend local(model);
  PrefillWorkerOptions prefill_options;
  prefill_options.transfer_buffer_keep_bytes = 8 << 20;
  prefill_options.prefault = true;
  auto prefill =
      PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback(), prefill_options);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  DecodeWorkerOptions options;
  options.transport = Loopback();
  options.transfer_buffer_keep_bytes = 8 << 20;
  options.resident_kv_budget_bytes = 4 << 20;
  options.prefault = true;
  auto decode = DecodeWorker::Create(std::make_unique<CpuBackend>(model), options);
  ASSERT_TRUE(decode.ok()) << decode.status();
  EXPECT_EQ((*prefill)->bundle_buffer_stats().kept_bytes, 8 << 20);
  EXPECT_EQ((*decode)->bundle_buffer_stats().kept_bytes, 8 << 20);

  const int vocab = model->config().vocab_size;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const auto prompt = RandomTokens(200 + 150 * static_cast<int>(seed), vocab, 90 + seed);
    const auto want = *Generate(local, prompt, {6, {}, false});
    PrefillResult shipped;
    EXPECT_EQ(ServeShipped(**prefill, **decode, prompt, {}, 5, &shipped), want) << seed;
    EXPECT_GT(shipped.bundle_bytes, 0);
  }
  for (const WarmBufferPoolStats& s :
       {(*prefill)->bundle_buffer_stats(), (*decode)->bundle_buffer_stats()}) {
    EXPECT_EQ(s.fresh, 1) << "only the prefaulted buffer was allocated";
    EXPECT_EQ(s.reused, 3);
    EXPECT_EQ(s.in_use_bytes, 0);
  }
}

TEST(DisaggregatedTest, SmallBudgetPinAndTtlStillGiveTheTokensOfAMiss) {
  auto model = testing::MakeModel(testing::SmallConfig(), 47, "cache_budget");
  ASSERT_TRUE(model);
  CpuBackend local(model);
  const ModelConfig& c = model->config();
  // Room for about two one-block snapshots.
  auto prefill = StartPrefill(
      model, 2 * (testing::SnapshotBlockBytes(c) + testing::SnapshotStateBytes(c)) + 1000);
  ASSERT_TRUE(prefill.ok());
  auto decode = StartDecode(model);
  ASSERT_TRUE(decode.ok());

  std::vector<std::vector<int32_t>> docs, prompts, want;
  for (uint32_t i = 0; i < 4; ++i) {
    docs.push_back(RandomTokens(150, c.vocab_size, 90 + i));
    prompts.push_back(docs.back());
    const auto q = RandomTokens(10, c.vocab_size, 95 + i);
    prompts.back().insert(prompts.back().end(), q.begin() + 1, q.end());
    want.push_back(*Generate(local, prompts.back(), {6, SamplingParams{}, false}));
  }
  SnapshotRetention pin, ttl;
  pin.pinned = true;
  ttl.ttl = absl::Milliseconds(300);
  ASSERT_TRUE((*prefill)->Precache(docs[0], "", pin, nullptr).ok());
  ASSERT_TRUE((*prefill)->Precache(docs[1], "", {}, nullptr).ok());
  ASSERT_TRUE((*prefill)->Precache(docs[2], "", {}, nullptr).ok());  // evicts doc 1, not doc 0
  for (int i : {0, 2, 1}) {  // (serving 1 saves its snapshot again, evicting 2)
    auto [got, cached] = Serve(**prefill, **decode, prompts[i]);
    EXPECT_EQ(got, want[i]) << "document " << i;
    EXPECT_EQ(cached, i == 1 ? 0 : 128) << "document " << i;
  }
  ASSERT_TRUE((*prefill)->Precache(docs[3], "", ttl, nullptr).ok());
  EXPECT_EQ(Serve(**prefill, **decode, prompts[3]).second, 128);
  absl::SleepFor(absl::Milliseconds(400));
  auto [got, cached] = Serve(**prefill, **decode, prompts[3]);
  EXPECT_EQ(got, want[3]);
  EXPECT_EQ(cached, 0);  // expired
}

// Workers holding the shared K/V in bf16: a shipped bundle, a cache hit and a miss give the
// in-process bf16 engine's tokens; a decode worker holding fp32 K/V refuses their bundles.
TEST(DisaggregatedTest, Bf16KvGivesTheInProcessTokensAndIsRefusedByAnF32Worker) {
  ModelConfig config = testing::SmallConfig();
  config.kv_dtype = KvDtype::kBF16;
  auto model = testing::MakeModel(config, 48, "kv_bf16");
  auto f32_model = testing::MakeModel(testing::SmallConfig(), 48, "kv_f32");
  ASSERT_TRUE(model && f32_model);
  auto prefill = StartPrefill(model, 64 << 20);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = StartDecode(model);
  ASSERT_TRUE(decode.ok());
  CpuBackend local(model);

  const int vocab = config.vocab_size;
  const auto document = RandomTokens(300, vocab, 80);
  ASSERT_TRUE((*prefill)->Precache(document, "", {}, nullptr).ok());
  auto with_question = document;
  const auto question = RandomTokens(20, vocab, 81);
  with_question.insert(with_question.end(), question.begin() + 1, question.end());
  const auto miss = RandomTokens(200, vocab, 82);
  for (const bool hit : {true, false}) {
    const std::vector<int32_t>& prompt = hit ? with_question : miss;
    const auto [got, cached] = Serve(**prefill, **decode, prompt);
    EXPECT_EQ(cached, hit ? 256 : 0);
    EXPECT_EQ(got, *Generate(local, prompt, {6, {}, false})) << (hit ? "hit" : "miss");
  }

  auto f32_decode = StartDecode(f32_model);
  ASSERT_TRUE(f32_decode.ok());
  auto shipped = (*prefill)->Prefill(Call(miss, {}, (*f32_decode)->address()));
  EXPECT_EQ(shipped.status().code(), absl::StatusCode::kFailedPrecondition) << shipped.status();
}

TEST(DisaggregatedTest, SnapshotCopiedToAnotherPrefillWorkerHitsThere) {
  auto model = testing::MakeModel(testing::SmallConfig(), 45, "cache_copy");
  auto other = testing::MakeModel(testing::SmallConfig(), 46, "cache_copy_other");
  ASSERT_TRUE(model && other);
  CpuBackend local(model);
  PrefillWorkerOptions cache;
  cache.cache_budget_bytes = 64 << 20;
  auto a = StartPrefill(model, cache.cache_budget_bytes);
  auto b = StartPrefill(model, cache.cache_budget_bytes);
  auto foreign = StartPrefill(other, cache.cache_budget_bytes);
  ASSERT_TRUE(a.ok() && b.ok() && foreign.ok());
  auto decode = StartDecode(model);
  ASSERT_TRUE(decode.ok());

  const int vocab = model->config().vocab_size;
  const auto document = RandomTokens(270, vocab, 80);
  auto precached = (*a)->Precache(document, "", {}, nullptr);
  ASSERT_TRUE(precached.ok()) << precached.status();
  auto copied =
      (*a)->CopySnapshot(precached->snapshot.key, (*b)->transport().address(), absl::Seconds(20));
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_GT(copied->bytes, 0u);
  for (int i = 0; i < 200 && (*b)->cache()->List().empty(); ++i) {  // kept off the UCX thread
    absl::SleepFor(absl::Milliseconds(10));
  }

  auto prompt = document;
  const auto question = RandomTokens(20, vocab, 81);
  prompt.insert(prompt.end(), question.begin() + 1, question.end());
  const auto want = *Generate(local, prompt, {6, SamplingParams{}, false});
  auto shipped = (*b)->Prefill(Call(prompt, {}, (*decode)->address()));
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(shipped->cached_tokens, 256);
  Stream stream;
  ASSERT_TRUE((*decode)
                  ->Decode({.sender = shipped->sender,
                            .transfer_id = shipped->transfer_id,
                            .max_new_tokens = 5,
                            .wait = absl::Seconds(10)},
                           stream.Callback())
                  .ok());
  ASSERT_TRUE(stream.WaitFinished());
  std::vector<int32_t> got = {shipped->first_token};
  got.insert(got.end(), stream.tokens.begin(), stream.tokens.end());
  EXPECT_EQ(got, want);

  // Unknown snapshots and workers of another model are refused.
  EXPECT_EQ(
      (*a)->CopySnapshot(BlockKey{}, (*b)->transport().address(), absl::Seconds(5)).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ((*a)->CopySnapshot(precached->snapshot.key, (*foreign)->transport().address(),
                               absl::Seconds(5))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*foreign)->cache()->List().empty());

  // A worker under a cache key takes copies only from holders of the same key: a copy is how a
  // worker that can reach the UCX port would otherwise poison another's cache.
  PrefillWorkerOptions keyed = cache;
  keyed.cache_key = "cluster-cache-key-0123456789";
  auto locked = PrefillWorker::Create(std::make_unique<CpuBackend>(model), Loopback(), keyed);
  ASSERT_TRUE(locked.ok()) << locked.status();
  EXPECT_EQ((*a)->CopySnapshot(precached->snapshot.key, (*locked)->transport().address(),
                               absl::Seconds(5))
                .status()
                .code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE((*locked)->cache()->List().empty());
}

}  // namespace
}  // namespace yoco
