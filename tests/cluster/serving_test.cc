// The stack as a deployment runs it (every gRPC connection mutual TLS, the cluster's transport
// and cache keys on every worker; two prefill and two decode workers): greedy and sampled
// tokens through the router equal the in-process engine's, also for prompts longer than one
// retention chunk and for 32 concurrent streams; workers dying or draining lose no token; bad
// input is refused with a clear status and serving goes on; a client that leaves or runs out of
// time frees what the workers held for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <numeric>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "lib/engine/npy.h"
#include "lib/text/byte_tokenizer.h"
#include "tests/cluster/serving_cluster.h"
#include "tests/grammar/schema_reference.h"

namespace yoco::testing {
namespace {

class ClusterServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.secure = true;
    options.prefill_workers = 2;
    options.decode_workers = 2;
    auto started = ServingCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
  }

  // Generate through the router, expecting the in-process engine's tokens.
  void ExpectEngineTokens(const std::vector<int32_t>& prompt, int max_new_tokens,
                          const SamplingParams& sampling = {}) {
    const Generated got = cluster_->Generate(Request(prompt, max_new_tokens, sampling));
    EXPECT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.tokens, InProcessTokens(prompt, max_new_tokens, sampling));
  }

  // Summed over both workers of a role.
  double DecodeMetric(absl::string_view name) {
    return cluster_->decode(0).Metric(name) + cluster_->decode(1).Metric(name);
  }
  double PrefillMetric(absl::string_view name) {
    return cluster_->prefill(0).Metric(name) + cluster_->prefill(1).Metric(name);
  }
  bool DecodeFreed() {
    return WaitFor(
        [&] {
          return DecodeMetric("yoco_decode_active_sequences") == 0 &&
                 DecodeMetric("yoco_decode_state_memory_bytes") == 0;
        },
        absl::Seconds(10));
  }

  // A request refused with INVALID_ARGUMENT, its message naming `what`.
  void ExpectRefused(const v1::GenerateRequest& request, const std::string& what) {
    const Generated refused = cluster_->Generate(request);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_THAT(refused.status.error_message(), ::testing::HasSubstr(what));
  }

  // The decode worker carrying a stream's `sequences` (the other one idle), once it has them.
  Service* Carrier(double sequences) {
    Service* carrier = nullptr;
    EXPECT_TRUE(WaitFor(
        [&] {
          const double first = cluster_->decode(0).Metric("yoco_decode_active_sequences");
          const double second = cluster_->decode(1).Metric("yoco_decode_active_sequences");
          if (first + second == sequences && first >= 0 && second >= 0 &&
              (first == 0 || second == 0)) {
            carrier = first == sequences ? &cluster_->decode(0) : &cluster_->decode(1);
          }
          return carrier != nullptr;
        },
        absl::Seconds(5)));
    return carrier;
  }

  std::unique_ptr<ServingCluster> cluster_;
};

SamplingParams Sampled(float temperature, int top_k, float top_p, uint64_t seed) {
  SamplingParams s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.seed = seed;
  return s;
}

TEST_F(ClusterServingTest, TokensEqualTheInProcessEngine) {
  ExpectEngineTokens(RandomPrompt(1, 12), 20);
  ExpectEngineTokens(RandomPrompt(2, 300), 20);  // longer than one retention chunk
  ExpectEngineTokens({0}, 8);
  ExpectEngineTokens(RandomPrompt(3, 100), 30, Sampled(0.8f, 50, 1.0f, 7));
  ExpectEngineTokens(RandomPrompt(4, 40), 30, Sampled(1.2f, 0, 0.9f, 9));
  // Logit adjustments, which depend on the tokens so far: prefilled where decoded, and shipped.
  SamplingParams adjusted = Sampled(0.8f, 0, 1.0f, 11);
  adjusted.logit_bias = {{5, 3.0f}, {300, -2.0f}};
  adjusted.repetition_penalty = 1.3f;
  adjusted.frequency_penalty = 0.6f;
  adjusted.presence_penalty = 0.3f;
  adjusted.min_tokens = 4;
  adjusted.min_p = 0.02f;
  ExpectEngineTokens(RandomPrompt(8, 12), 30, adjusted);
  ExpectEngineTokens(RandomPrompt(9, 300), 30, adjusted);

  // 32 concurrent streams of mixed lengths.
  std::vector<v1::GenerateRequest> requests;
  for (int i = 1; i <= 32; ++i) {
    requests.push_back(
        Request(RandomPrompt(100 + i, 5 + 13 * i), 4 + i, Sampled(0.7f, 0, 1.0f, i)));
  }
  const std::vector<Generated> served = GenerateAtOnce(cluster_->stub(), requests);
  for (int i = 1; i <= 32; ++i) {
    SCOPED_TRACE(absl::StrCat("concurrent stream ", i));
    EXPECT_TRUE(served[i - 1].status.ok()) << served[i - 1].status.error_message();
    EXPECT_EQ(served[i - 1].tokens,
              InProcessTokens(RandomPrompt(100 + i, 5 + 13 * i), 4 + i, Sampled(0.7f, 0, 1.0f, i)));
  }

  // The counters saw that traffic, and both workers say where they run the model.
  Service& router = cluster_->router();
  EXPECT_GE(router.Metric("yoco_router_requests_total{outcome=\"ok\"}"), 37);
  EXPECT_GE(router.Metric("yoco_router_time_to_first_token_seconds_count"), 37);
  EXPECT_GT(DecodeMetric("yoco_decode_steps_total"), 0);
  EXPECT_GT(DecodeMetric("yoco_decode_transfers_received_total"), 0);
  EXPECT_GT(PrefillMetric("yoco_prefill_transfers_sent_total"), 0);
  EXPECT_EQ(cluster_->decode(0).Metric("yoco_worker_backend_info{backend=\"cpu\""), 1);
  EXPECT_EQ(cluster_->prefill(0).Metric("yoco_worker_backend_info{backend=\"cpu\""), 1);
}

// Logprobs through the router are the log-softmax of `yoco logits` over the same tokens, for the
// first token (prefilled locally on the decode worker, or remotely and shipped) and every decode
// step; each token, chosen or among the top ones, comes with its bytes (none for ids the
// tokenizer cannot spell).
TEST_F(ClusterServingTest, LogprobsAreTheLogSoftmaxOfYocoLogits) {
  constexpr int kTop = 4;
  // The tiny model's tokenizer is the byte one; its vocabulary has ids beyond the bytes.
  const ByteTokenizer tokenizer;
  auto spelled = [&](int32_t id) {
    absl::StatusOr<std::string> bytes = tokenizer.Decode({&id, 1});
    return bytes.ok() ? *bytes : std::string();
  };
  int local = 0;
  for (const int length : {12, 300}) {
    SCOPED_TRACE(absl::StrCat("prompt of ", length));
    const std::vector<int32_t> prompt = RandomPrompt(70 + length, length);
    SamplingParams sampling = Sampled(0.9f, 0, 1.0f, 5);
    sampling.logprobs = kTop;
    const Generated got = cluster_->Generate(Request(prompt, 10, sampling));
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    sampling.logprobs = -1;
    ASSERT_EQ(got.tokens, InProcessTokens(prompt, 10, sampling));
    local += got.finish.local_prefill() ? 1 : 0;

    std::vector<int32_t> sequence = prompt;
    sequence.insert(sequence.end(), got.tokens.begin(), got.tokens.end() - 1);
    const std::string out = cluster_->dir() + absl::StrCat("/logits", length, ".npy");
    const ToolRun run = RunToCompletion(BinaryPath("yoco"),
                                        {"logits", "--model", TinyModelDir(), "--tokens",
                                         absl::StrJoin(sequence, ","), "--out", out},
                                        out + ".log");
    ASSERT_EQ(run.status, 0) << run.output;
    absl::StatusOr<NpyArray> logits = ReadNpy(out);
    ASSERT_TRUE(logits.ok()) << logits.status();
    const int64_t vocab = logits->shape.back();
    for (size_t i = 0; i < got.messages.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("token ", i));
      const float* row = logits->data.data() + (prompt.size() - 1 + i) * vocab;
      long double total = 0;
      for (int64_t v = 0; v < vocab; ++v) total += std::exp(static_cast<long double>(row[v]));
      auto want = [&](int32_t id) { return static_cast<double>(row[id] - std::log(total)); };
      std::vector<int32_t> ranked(vocab);
      std::iota(ranked.begin(), ranked.end(), 0);
      std::stable_sort(ranked.begin(), ranked.end(),
                       [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      const v1::GeneratedToken& m = got.messages[i];
      EXPECT_EQ(m.logprob().id(), m.id());
      EXPECT_NEAR(m.logprob().logprob(), want(m.id()), 2e-4);
      EXPECT_EQ(m.logprob().token(), spelled(m.id()));
      ASSERT_EQ(m.top_logprobs_size(), kTop);
      for (int k = 0; k < kTop; ++k) {
        const v1::TokenLogprob& top = m.top_logprobs(k);
        EXPECT_NEAR(top.logprob(), want(top.id()), 2e-4);
        // The k-th most likely, up to logits equal within rounding.
        EXPECT_GE(want(top.id()), want(ranked[k]) - 2e-4) << "rank " << k;
        EXPECT_EQ(top.token(), spelled(top.id()));
      }
    }
  }
  EXPECT_EQ(local, 1);  // the short prompt was prefilled on the decode worker, the long one not

  v1::GenerateRequest too_many = Request(RandomPrompt(9, 10), 4);
  too_many.mutable_sampling()->set_logprobs(kMaxTopLogprobs + 1);
  ExpectRefused(too_many, "logprobs");
}

// Score gives every prompt token's logprob given those before it: the log-softmax of `yoco
// logits` at the position before; a generated token's score equals the logprob it was generated
// with; bad input is refused naming the field.
TEST_F(ClusterServingTest, ScoringAPromptGivesTheLogSoftmaxOfYocoLogits) {
  const std::vector<int32_t> prompt = RandomPrompt(91, 200);
  v1::ScoreRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_top_logprobs(2);
  v1::ScoreResponse scored;
  {
    grpc::ClientContext context;
    const grpc::Status st = cluster_->stub().Score(&context, request, &scored);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  ASSERT_EQ(scored.tokens_size(), static_cast<int>(prompt.size()));
  EXPECT_FALSE(scored.tokens(0).has_logprob());  // nothing precedes the first token
  const std::string out = cluster_->dir() + "/scored.npy";
  const ToolRun run = RunToCompletion(
      BinaryPath("yoco"),
      {"logits", "--model", TinyModelDir(), "--tokens", absl::StrJoin(prompt, ","), "--out", out},
      out + ".log");
  ASSERT_EQ(run.status, 0) << run.output;
  absl::StatusOr<NpyArray> logits = ReadNpy(out);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int64_t vocab = logits->shape.back();
  double total = 0;
  for (size_t i = 1; i < prompt.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("token ", i));
    const float* row = logits->data.data() + (i - 1) * vocab;
    long double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<long double>(row[v]));
    const float best = *std::max_element(row, row + vocab);
    const v1::GeneratedToken& t = scored.tokens(static_cast<int>(i));
    EXPECT_EQ(t.id(), prompt[i]);
    EXPECT_NEAR(t.logprob().logprob(), static_cast<double>(row[prompt[i]] - std::log(sum)), 2e-4);
    ASSERT_EQ(t.top_logprobs_size(), 2);
    EXPECT_NEAR(t.top_logprobs(0).logprob(), static_cast<double>(best - std::log(sum)), 2e-4);
    total += t.logprob().logprob();
  }
  EXPECT_NEAR(scored.total_logprob(), total, 1e-6);

  // A generated answer scored afterwards: the same logprobs it was generated with.
  SamplingParams sampling;
  sampling.logprobs = 0;
  const std::vector<int32_t> question = RandomPrompt(92, 30);
  const Generated answer = cluster_->Generate(Request(question, 8, sampling));
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  v1::ScoreRequest again;
  again.mutable_tokens()->mutable_ids()->Add(question.begin(), question.end());
  again.mutable_tokens()->mutable_ids()->Add(answer.tokens.begin(), answer.tokens.end());
  v1::ScoreResponse rescored;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(cluster_->stub().Score(&context, again, &rescored).ok());
  }
  for (size_t i = 0; i < answer.messages.size(); ++i) {
    EXPECT_NEAR(rescored.tokens(static_cast<int>(question.size() + i)).logprob().logprob(),
                answer.messages[i].logprob().logprob(), 2e-4)
        << "answer token " << i;
  }

  request.set_top_logprobs(kMaxTopLogprobs + 1);
  grpc::ClientContext context;
  const grpc::Status refused = cluster_->stub().Score(&context, request, &scored);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto field = trailers.find("yoco-invalid-field");
  ASSERT_NE(field, trailers.end());
  EXPECT_EQ(std::string(field->second.data(), field->second.size()), "top_logprobs");
}

// Questions on one document go to the decode worker the document went to, which keeps its K/V,
// so every question after the first ships only its own rows and the self-decoder states.
TEST_F(ClusterServingTest, LaterQuestionsOnADocumentShipLess) {
  const std::vector<int32_t> doc = RandomPrompt(50, 700);
  std::vector<uint64_t> shipped;
  for (int q = 1; q <= 3; ++q) {
    if (q > 1) {
      // The router prices a decode worker's load from its last probe: one taken while the
      // previous question was still being freed would count it as busy and send this question
      // to the other worker, whole. Idle workers, then a probe (every 200 ms) that saw them so.
      ASSERT_TRUE(DecodeFreed());
      absl::SleepFor(absl::Milliseconds(500));
    }
    std::vector<int32_t> prompt = doc;
    const std::vector<int32_t> question = RandomPrompt(60 + q, 20);
    prompt.insert(prompt.end(), question.begin() + 1, question.end());
    const Generated got = cluster_->Generate(Request(prompt, 6));
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.tokens, InProcessTokens(prompt, 6));
    shipped.push_back(got.finish.transfer_bytes());
  }
  EXPECT_LT(2 * shipped[1], shipped[0]);
  EXPECT_LT(2 * shipped[2], shipped[0]);
}

// Requests that end on their first token ship no state bundle: nothing is left waiting on a
// decode worker.
TEST_F(ClusterServingTest, FirstTokenRequestsShipNothing) {
  const double sent = PrefillMetric("yoco_prefill_transfers_sent_total");
  const double received = DecodeMetric("yoco_decode_transfers_received_total");
  for (int i = 1; i <= 12; ++i) {
    EXPECT_TRUE(cluster_->Generate(Request(RandomPrompt(40 + i, 300), 1)).status.ok());
  }
  EXPECT_EQ(PrefillMetric("yoco_prefill_transfers_sent_total"), sent);
  EXPECT_EQ(DecodeMetric("yoco_decode_transfers_received_total"), received);
  EXPECT_EQ(DecodeMetric("yoco_decode_waiting_bundles"), 0);
}

// A stop string ends the stream right after the token that completes it.
TEST_F(ClusterServingTest, StopStringEndsTheStream) {
  v1::GenerateRequest request;
  request.set_text("Hello, world");
  request.mutable_sampling()->set_max_new_tokens(60);
  const Generated full = cluster_->Generate(request);
  ASSERT_TRUE(full.status.ok()) << full.status.error_message();
  std::string stop;
  for (size_t i = 3; i < full.text.size() && stop.empty(); ++i) {
    if (isalnum(static_cast<unsigned char>(full.text[i]))) stop = full.text.substr(i, 1);
  }
  ASSERT_FALSE(stop.empty()) << "no character to stop at in: " << full.text;
  request.mutable_sampling()->add_stop_strings(stop);
  const Generated cut = cluster_->Generate(request);
  ASSERT_TRUE(cut.status.ok()) << cut.status.error_message();
  EXPECT_EQ(cut.finish.reason(), v1::FINISH_REASON_STOP);
  EXPECT_TRUE(full.text.starts_with(cut.text)) << cut.text << " | " << full.text;
  EXPECT_TRUE(cut.text.ends_with(stop)) << cut.text;
  EXPECT_LT(cut.text.size(), full.text.size());
}

// A client that goes away mid-stream, and one whose deadline passes: either way the decode worker
// ends the sequence and frees its memory. A deadline that passes during prefill stops the
// prefill: no bundle is shipped, and the worker is not blamed.
TEST_F(ClusterServingTest, DepartedClientsFreeTheWorkers) {
  {
    grpc::ClientContext context;
    auto stream = cluster_->stub().Generate(&context, Request(RandomPrompt(8, 30), 4000));
    v1::GenerateResponse event;
    ASSERT_TRUE(stream->Read(&event));
    // The first token comes from the prefill worker, before the decode worker admits the rest.
    EXPECT_TRUE(WaitFor([&] { return DecodeMetric("yoco_decode_active_sequences") == 1; },
                        absl::Seconds(10)));
    context.TryCancel();
    while (stream->Read(&event)) {
    }
    stream->Finish();
  }
  EXPECT_TRUE(DecodeFreed());

  const Generated late =
      cluster_->Generate(Request(RandomPrompt(9, 30), 4000), absl::Milliseconds(500));
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(DecodeFreed());

  const double sent = PrefillMetric("yoco_prefill_transfers_sent_total");
  const double marked =
      cluster_->router().Metric("yoco_router_worker_failures_total{role=\"prefill\"}");
  const Generated early =
      cluster_->Generate(Request(RandomPrompt(11, 4090), 4), absl::Milliseconds(30));
  EXPECT_EQ(early.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitFor([&] { return PrefillMetric("yoco_prefill_active_requests") == 0; },
                      absl::Seconds(5)));
  EXPECT_EQ(PrefillMetric("yoco_prefill_transfers_sent_total"), sent);
  EXPECT_EQ(cluster_->router().Metric("yoco_router_worker_failures_total{role=\"prefill\"}"),
            marked);
}

// Bad input gets INVALID_ARGUMENT and the services keep serving; a document beyond what one
// request carries is refused by the client saying what to do; forged internal calls (addresses
// of random bytes, envelopes sealed without the transport key, made with the router's own
// certificate) are refused and the worker lives.
TEST_F(ClusterServingTest, BadInputIsRefusedAndServingGoesOn) {
  auto refused = [&](v1::GenerateRequest request) {
    return cluster_->Generate(request).status.error_code();
  };
  const auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  EXPECT_EQ(refused(Request({0, 512}, 4)), kInvalid);  // out of the vocabulary
  EXPECT_EQ(refused(Request({0, -3}, 4)), kInvalid);
  EXPECT_EQ(refused(Request({0, 5}, 4, Sampled(-1.0f, 0, 1.0f, 0))), kInvalid);
  EXPECT_EQ(refused(Request({0, 5}, 4, Sampled(1.0f, 0, 1.5f, 0))), kInvalid);
  EXPECT_EQ(refused(Request({0, 5}, 100000000)), kInvalid);
  EXPECT_EQ(refused(Request(RandomPrompt(10, 4100), 4)), kInvalid);  // past max_seq_len
  v1::GenerateRequest empty;
  empty.set_text("");
  EXPECT_EQ(refused(empty), kInvalid);

  const std::string huge = cluster_->dir() + "/huge.txt";
  std::ofstream(huge) << std::string(65 << 20, 'a');
  std::vector<std::string> args = cluster_->CliFlags();
  args.insert(args.end(), {"precache", "--file", huge});
  const ToolRun oversized = RunToCompletion(BinaryPath("yoco-cli"), args, cluster_->dir() + "/cli");
  EXPECT_NE(oversized.status, 0);
  EXPECT_THAT(oversized.output, ::testing::HasSubstr("one request to the router carries"));
  std::filesystem::remove(huge);

  v1::PrecacheRequest precache;
  const std::vector<int32_t> doc = RandomPrompt(26, 200);
  precache.mutable_tokens()->mutable_ids()->Add(doc.begin(), doc.end());
  precache.set_pin(true);
  v1::PrecacheResponse held;
  grpc::ClientContext context;
  ASSERT_TRUE(cluster_->stub().Precache(&context, precache, &held).ok());
  const std::string& dir = cluster_->dir();
  const ToolRun forged = RunToCompletion(
      BinaryPath("forged_call"),
      {held.worker(), held.handle(), dir + "/ca.pem", dir + "/server.pem", dir + "/server.key"},
      dir + "/forged");
  EXPECT_EQ(forged.status, 0) << forged.output;
  ExpectEngineTokens(RandomPrompt(6, 20), 10);
}

// The tokens of each choice of a Generate with n > 1, by the choice its messages name.
std::vector<std::vector<int32_t>> ByChoice(const Generated& got, int n) {
  std::vector<std::vector<int32_t>> tokens(n);
  for (const v1::GeneratedToken& m : got.messages) {
    EXPECT_LT(m.choice(), static_cast<uint32_t>(n));
    if (m.choice() < static_cast<uint32_t>(n)) tokens[m.choice()].push_back(m.id());
  }
  return tokens;
}

SamplingParams OfChoice(SamplingParams sampling, uint32_t choice) {
  sampling.seed = ChoiceSeed(sampling.seed, choice);
  return sampling;
}

// n > 1: one prefill (on the decode worker for a short prompt, shipped for a long one), each
// choice the in-process engine's tokens for that choice's seed, with its own finish; then a
// decode worker killed mid-stream, every choice continued exactly on the other.
TEST_F(ClusterServingTest, ChoicesAreTheEnginesTokensOfTheirSeedsThroughADecodeDeath) {
  constexpr int kChoices = 4;
  SamplingParams sampling = Sampled(0.9f, 0, 1.0f, 21);
  sampling.presence_penalty = 0.4f;              // the history is each choice's own
  sampling.stop_token_ids = {7, 9, 11, 13, 15};  // so that some choices end early
  int local = 0;
  for (const int length : {12, 300}) {
    SCOPED_TRACE(absl::StrCat("prompt of ", length));
    const std::vector<int32_t> prompt = RandomPrompt(80 + length, length);
    v1::GenerateRequest request = Request(prompt, 40, sampling);
    request.mutable_sampling()->set_n(kChoices);
    const double prefills = PrefillMetric("yoco_prefill_transfers_sent_total");
    const Generated got = cluster_->Generate(request);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    local += got.finish.local_prefill() ? 1 : 0;
    EXPECT_EQ(PrefillMetric("yoco_prefill_transfers_sent_total"),
              prefills + (got.finish.local_prefill() ? 0 : 1));
    const std::vector<std::vector<int32_t>> tokens = ByChoice(got, kChoices);
    ASSERT_EQ(got.finish.choices_size(), kChoices);
    uint32_t total = 0;
    for (uint32_t c = 0; c < kChoices; ++c) {
      SCOPED_TRACE(absl::StrCat("choice ", c));
      const std::vector<int32_t> want = InProcessTokens(prompt, 40, OfChoice(sampling, c));
      EXPECT_EQ(tokens[c], want);
      EXPECT_EQ(got.finish.choices(c).generated_tokens(), want.size());
      EXPECT_EQ(got.finish.choices(c).reason(),
                want.size() < 40 ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_LENGTH);
      total += static_cast<uint32_t>(want.size());
    }
    EXPECT_NE(tokens[0], tokens[1]);
    EXPECT_EQ(got.finish.usage().generated_tokens(), total);
    EXPECT_EQ(got.finish.reason(), got.finish.choices(0).reason());
  }
  EXPECT_EQ(local, 1);

  // Long answers, the decode worker carrying them killed after the first tokens came.
  const std::vector<int32_t> prompt = RandomPrompt(91, 60);
  SamplingParams long_answers = Sampled(0.8f, 0, 1.0f, 33);
  long_answers.frequency_penalty = 0.5f;
  v1::GenerateRequest request = Request(prompt, 300, long_answers);
  request.mutable_sampling()->set_n(3);
  grpc::ClientContext context;
  auto stream = cluster_->stub().Generate(&context, request);
  Generated got;
  v1::GenerateResponse event;
  for (int i = 0; i < 6; ++i) {  // the three first tokens and some more
    ASSERT_TRUE(stream->Read(&event));
    got.messages.push_back(event.token());
  }
  Service* carrier = Carrier(3);
  ASSERT_NE(carrier, nullptr);
  carrier->process().Pause();
  const double retries = cluster_->router().Metric("yoco_router_retries_total");
  carrier->process().Kill();
  while (stream->Read(&event)) {
    if (event.has_token()) got.messages.push_back(event.token());
  }
  EXPECT_TRUE(stream->Finish().ok());
  const std::vector<std::vector<int32_t>> tokens = ByChoice(got, 3);
  for (uint32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(tokens[c], InProcessTokens(prompt, 300, OfChoice(long_answers, c))) << c;
  }
  EXPECT_EQ(cluster_->router().Metric("yoco_router_retries_total"), retries + 1);

  v1::GenerateRequest too_many = Request(RandomPrompt(9, 10), 4);
  too_many.mutable_sampling()->set_n(kMaxChoices + 1);
  ExpectRefused(too_many, "n must be");
}

// A stop string that ends one of several choices ends it on the decode worker too: the worker
// stops decoding it (yoco_decode_tokens_total counts what it decoded), and the other choice
// goes on to its length with the tokens it has without the stop string.
TEST_F(ClusterServingTest, AStopStringEndsItsChoiceOnTheDecodeWorker) {
  constexpr int kLength = 1500;
  v1::GenerateRequest request = Request(RandomPrompt(97, 300), kLength, Sampled(1.0f, 0, 1.0f, 41));
  request.mutable_sampling()->set_n(2);
  double decoded = DecodeMetric("yoco_decode_tokens_total");
  const Generated full = cluster_->Generate(request);
  ASSERT_TRUE(full.status.ok()) << full.status.error_message();
  // The first token of each choice is the prefill worker's.
  EXPECT_EQ(DecodeMetric("yoco_decode_tokens_total") - decoded, 2 * (kLength - 1));
  std::string text[2];
  size_t early_end = 0;  // choice 0's text after its first 100 tokens
  for (const v1::GeneratedToken& m : full.messages) {
    text[m.choice()] += m.text();
    if (m.choice() == 0 && m.index() < 100) early_end = text[0].size();
  }
  // Three ASCII characters that end early in choice 0 and never come in choice 1.
  std::string stop;
  for (size_t i = 0; i + 3 <= early_end && stop.empty(); ++i) {
    const std::string s = text[0].substr(i, 3);
    const bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return c > 0; });
    if (ascii && text[1].find(s) == std::string::npos) stop = s;
  }
  ASSERT_FALSE(stop.empty()) << "no stop string for choice 0 alone in: " << text[0];

  request.mutable_sampling()->add_stop_strings(stop);
  decoded = DecodeMetric("yoco_decode_tokens_total");
  const Generated cut = cluster_->Generate(request);
  ASSERT_TRUE(cut.status.ok()) << cut.status.error_message();
  ASSERT_EQ(cut.finish.choices_size(), 2);
  EXPECT_EQ(cut.finish.choices(0).reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(cut.finish.choices(1).reason(), v1::FINISH_REASON_LENGTH);
  const std::vector<std::vector<int32_t>> before = ByChoice(full, 2), after = ByChoice(cut, 2);
  EXPECT_EQ(after[1], before[1]);
  ASSERT_LT(after[0].size(), 110u);
  EXPECT_TRUE(std::equal(after[0].begin(), after[0].end(), before[0].begin()));
  // Choice 0 went on for what the worker decoded before the router's word came (about 100
  // tokens here), not for its whole length (then this would be 2 * (kLength - 1)).
  EXPECT_LT(DecodeMetric("yoco_decode_tokens_total") - decoded, kLength + kLength / 2);
  EXPECT_TRUE(DecodeFreed());
}

// Structured output wherever the prompt is prefilled (on the decode worker, or shipped from a
// prefill worker, its rule rebuilt there from the first token), one choice or several: every
// answer is one JSON value its schema accepts, then EOS.
TEST_F(ClusterServingTest, StructuredAnswersFollowTheirSchemaWhereverPrefilled) {
  const ByteTokenizer tokenizer;
  int local = 0;
  for (const int schema : {0, 1, 2, 6}) {  // 6: patterns
    const char* text = kSchemas[schema];
    const nlohmann::json root = nlohmann::json::parse(text);
    for (const int length : {12, 300}) {
      SCOPED_TRACE(absl::StrCat("schema ", schema, ", prompt of ", length));
      v1::GenerateRequest request =
          Request(RandomPrompt(40 + length + schema, length), 400, Sampled(1.0f, 0, 1.0f, 3));
      request.mutable_sampling()->mutable_response_format()->set_json_schema(text);
      request.mutable_sampling()->set_n(3);
      const Generated got = cluster_->Generate(request);
      ASSERT_TRUE(got.status.ok()) << got.status.error_message();
      local += got.finish.local_prefill() ? 1 : 0;
      const std::vector<std::vector<int32_t>> tokens = ByChoice(got, 3);
      for (uint32_t c = 0; c < 3; ++c) {
        ASSERT_FALSE(tokens[c].empty());
        EXPECT_EQ(tokens[c].back(), kEosId);
        EXPECT_EQ(got.finish.choices(c).reason(), v1::FINISH_REASON_EOS);
        absl::StatusOr<std::string> answer = tokenizer.Decode(tokens[c]);
        ASSERT_TRUE(answer.ok());
        const nlohmann::json doc = nlohmann::json::parse(*answer, nullptr, false);
        ASSERT_FALSE(doc.is_discarded()) << *answer;
        EXPECT_TRUE(Valid(root, root, doc)) << *answer;
      }
    }
  }
  EXPECT_EQ(local, 4);

  // A regex the whole answer matches, checked by std::regex.
  const char* pattern = "(yes|no|maybe): [A-Z][a-z]{2,8}( [0-9]{1,3})?\\.";
  const std::regex reference(pattern, std::regex::ECMAScript);
  for (const int length : {12, 300}) {
    v1::GenerateRequest request =
        Request(RandomPrompt(70 + length, length), 100, Sampled(1.0f, 0, 1.0f, 5));
    request.mutable_sampling()->mutable_response_format()->set_regex(pattern);
    request.mutable_sampling()->set_n(3);
    const Generated got = cluster_->Generate(request);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    for (const std::vector<int32_t>& tokens : ByChoice(got, 3)) {
      ASSERT_FALSE(tokens.empty());
      EXPECT_EQ(tokens.back(), kEosId);
      absl::StatusOr<std::string> answer = tokenizer.Decode(tokens);
      ASSERT_TRUE(answer.ok());
      EXPECT_TRUE(std::regex_match(*answer, reference)) << *answer;
    }
  }

  // yoco-cli asks for the same: a pattern, a schema from a file; a bad pattern is refused.
  const std::string schema_file = cluster_->dir() + "/schema.json";
  std::ofstream(schema_file) << kSchemas[6];
  const nlohmann::json patterned = nlohmann::json::parse(kSchemas[6]);
  for (const std::vector<std::string>& rule :
       {std::vector<std::string>{"--regex", pattern}, {"--json-schema", schema_file}}) {
    std::vector<std::string> args = cluster_->CliFlags();
    args.insert(args.end(), {"generate", "--prompt", "Is it so?", "--max-new-tokens", "400",
                             "--temperature", "1", "--seed", "8"});
    args.insert(args.end(), rule.begin(), rule.end());
    const ToolRun cli = RunToCompletion(BinaryPath("yoco-cli"), args, cluster_->dir() + "/cli");
    ASSERT_EQ(cli.status, 0) << cli.output;
    ASSERT_TRUE(absl::EndsWith(cli.output, "\n")) << cli.output;
    const std::string answer = cli.output.substr(0, cli.output.size() - 1);
    if (rule[0] == "--regex") {
      EXPECT_TRUE(std::regex_match(answer, reference)) << answer;
    } else {
      const nlohmann::json doc = nlohmann::json::parse(answer, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << answer;
      EXPECT_TRUE(Valid(patterned, patterned, doc)) << answer;
    }
  }
  std::vector<std::string> bad = cluster_->CliFlags();
  bad.insert(bad.end(),
             {"generate", "--prompt", "Q", "--max-new-tokens", "4", "--regex", "a(?=b)"});
  const ToolRun refused = RunToCompletion(BinaryPath("yoco-cli"), bad, cluster_->dir() + "/cli");
  EXPECT_NE(refused.status, 0);
  EXPECT_THAT(refused.output, ::testing::HasSubstr("lookahead"));

  v1::GenerateRequest unsupported = Request(RandomPrompt(9, 10), 4);
  unsupported.mutable_sampling()->mutable_response_format()->set_json_schema(
      R"({"type": "string", "format": "date"})");
  ExpectRefused(unsupported, "format");
  v1::GenerateRequest lookahead = Request(RandomPrompt(9, 10), 4);
  lookahead.mutable_sampling()->mutable_response_format()->set_regex("a(?=b)");
  ExpectRefused(lookahead, "regex: at offset 3: lookahead");
}

// A killed prefill worker fails nothing; a killed decode worker's stream continues on the other
// with exactly the engine's tokens; SIGTERM to the last decode worker mid-stream lets the stream
// run to its end, then the worker exits 0.
TEST_F(ClusterServingTest, WorkersDyingOrDrainingLoseNoToken) {
  cluster_->prefill(0).process().Kill();
  ExpectEngineTokens(RandomPrompt(7, 60), 12);

  // Not much longer than 600 tokens: the retry prefills what was sent, which matches decoding it
  // to rounding only, and over thousands of greedy steps a near-tie of this random-weight model
  // can then flip.
  // With penalties, which must count the tokens sent before the cut as the straight run does.
  const std::vector<int32_t> prompt = RandomPrompt(5, 50);
  SamplingParams penalized;
  penalized.repetition_penalty = 1.2f;
  penalized.frequency_penalty = 1.0f;
  penalized.presence_penalty = 0.5f;
  {
    grpc::ClientContext context;
    auto stream = cluster_->stub().Generate(&context, Request(prompt, 600, penalized));
    std::vector<int32_t> tokens;
    v1::GenerateResponse event;
    ASSERT_TRUE(stream->Read(&event));
    tokens.push_back(event.token().id());
    // The worker carrying the stream (once it has admitted it: the first token comes from the
    // prefill worker), frozen at once so that it is certainly cut midway.
    Service* carrier = Carrier(1);
    ASSERT_NE(carrier, nullptr);
    carrier->process().Pause();
    const double retries = cluster_->router().Metric("yoco_router_retries_total");
    carrier->process().Kill();
    while (stream->Read(&event)) {
      if (event.has_token()) tokens.push_back(event.token().id());
    }
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_EQ(tokens, InProcessTokens(prompt, 600, penalized));
    // The stream was cut and continued, not finished before the kill.
    EXPECT_EQ(cluster_->router().Metric("yoco_router_retries_total"), retries + 1);
  }

  Service& last = cluster_->decode(0).running() ? cluster_->decode(0) : cluster_->decode(1);
  const std::vector<int32_t> drained = RandomPrompt(12, 40);
  grpc::ClientContext context;
  auto stream = cluster_->stub().Generate(&context, Request(drained, 1500));
  std::vector<int32_t> tokens;
  v1::GenerateResponse event;
  ASSERT_TRUE(stream->Read(&event));
  tokens.push_back(event.token().id());
  // Frozen while the signal is sent, so it certainly arrives mid-stream.
  last.process().Pause();
  kill(last.process().pid(), SIGTERM);
  last.process().Resume();
  while (stream->Read(&event)) {
    if (event.has_token()) tokens.push_back(event.token().id());
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(tokens, InProcessTokens(drained, 1500));
  absl::StatusOr<int> exit_status = last.process().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, 0);
  EXPECT_THAT(last.process().Log(), ::testing::HasSubstr("draining"));
}

}  // namespace
}  // namespace yoco::testing
