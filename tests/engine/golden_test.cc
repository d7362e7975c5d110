// The engine against golden data computed by running the official YOCO code (see
// tests/data/golden/*/README.txt): full-sequence logits, raw decode-step logits and the greedy
// tokens of the reference prefill+decode loop.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "lib/engine/cpu_backend.h"
#ifdef YOCO_HAVE_CUDA
#include "lib/engine/cuda_backend.h"
#endif
#include "lib/engine/generation.h"
#include "lib/engine/npy.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

// YOCO_TEST_DATA_DIR in the environment overrides the build's path (test binaries run from a
// bundle on another machine: scripts/device-check.sh).
std::string GoldenDir(const std::string& name) {
  const char* dir = std::getenv("YOCO_TEST_DATA_DIR");
  return std::string(dir != nullptr ? dir : YOCO_TEST_DATA_DIR) + "/golden/" + name;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// max |got − want| ≤ 1e-4 · max |want|, the bar.
void ExpectClose(const std::vector<float>& got, const NpyArray& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.data.size()) << what;
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(got[i] - want.data[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(want.data[i])));
  }
  EXPECT_LE(max_err, 1e-4 * max_ref)
      << what << ": max abs error " << max_err << ", max |ref| " << max_ref;
  ::testing::Test::RecordProperty(what + "_max_abs_error", absl::StrFormat("%.3e", max_err));
}

// (golden set, backend). The CUDA cases run where the build has CUDA and a GPU is present; the
// golden checkpoints are fp32, so the GPU computes in fp32 and meets the same 1e-4 bar.
class GoldenTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    const std::string name = std::get<0>(GetParam());
    auto model = Model::Load(GoldenDir(name));
    ASSERT_TRUE(model.ok()) << model.status();
    if (std::get<1>(GetParam()) == "cuda") {
#ifdef YOCO_HAVE_CUDA
      auto cuda = CudaBackend::Create(*model);
      if (absl::IsUnavailable(cuda.status())) GTEST_SKIP() << cuda.status();
      ASSERT_TRUE(cuda.ok()) << cuda.status();
      backend_ = std::move(*cuda);
#else
      GTEST_SKIP() << "built without CUDA";
#endif
    } else {
      backend_ = std::make_unique<CpuBackend>(*model);
    }
    prompt_ = ReadJson(GoldenDir(name) + "/tokens.json").get<std::vector<int32_t>>();
    generate_ = ReadJson(GoldenDir(name) + "/generate.json");
  }

  std::unique_ptr<Backend> backend_;
  std::vector<int32_t> prompt_;
  nlohmann::json generate_;
};

TEST_P(GoldenTest, FullSequenceLogits) {
  auto want = ReadNpy(GoldenDir(std::get<0>(GetParam())) + "/logits_full.npy");
  ASSERT_TRUE(want.ok()) << want.status();
  SequenceState state = SequenceState::Create(backend_->model().config());
  ForwardSegment seg{&state, prompt_, LogitsMode::kAll};
  std::vector<float> logits;
  ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
  ExpectClose(logits, *want, "logits_full");
}

TEST_P(GoldenTest, GreedyTokensAndDecodeLogits) {
  auto want = ReadNpy(GoldenDir(std::get<0>(GetParam())) + "/decode_logits.npy");
  ASSERT_TRUE(want.ok()) << want.status();
  const auto expected = generate_["new_tokens"].get<std::vector<int32_t>>();
  const int64_t V = backend_->model().config().vocab_size;

  // The reference loop: prefill all but the last prompt token, then one decode step per token.
  SequenceState state = SequenceState::Create(backend_->model().config());
  std::vector<float> logits, all_logits;
  ForwardSegment prefill{&state, absl::MakeConstSpan(prompt_).subspan(0, prompt_.size() - 1),
                         LogitsMode::kNone};
  ASSERT_TRUE(backend_->Forward({&prefill, 1}, &logits).ok());
  EXPECT_TRUE(logits.empty());
  int32_t input = prompt_.back();
  std::vector<int32_t> tokens;
  Sampler sampler;
  for (size_t step = 0; step < expected.size(); ++step) {
    ForwardSegment seg{&state, {&input, 1}, LogitsMode::kLast};
    ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
    ASSERT_EQ(logits.size(), static_cast<size_t>(V));
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    input = sampler.Sample(SamplingParams{}, logits, state.position);
    tokens.push_back(input);
  }
  EXPECT_EQ(tokens, expected);
  ExpectClose(all_logits, *want, "decode_logits");
}

TEST_P(GoldenTest, GenerateMatchesReferenceTokens) {
  GenerateOptions options;
  options.max_new_tokens = generate_["max_new_tokens"].get<int>();
  auto tokens = Generate(*backend_, prompt_, options);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, generate_["new_tokens"].get<std::vector<int32_t>>());
}

TEST_P(GoldenTest, EarlyExitPrefillAndChunkedPrefillGiveReferenceTokens) {
  // The disaggregated path: prefill the whole prompt in pieces of 100 (state carried), the last
  // piece with the cross-decoder for its last position only, then decode.
  const auto expected = generate_["new_tokens"].get<std::vector<int32_t>>();
  SequenceState state = SequenceState::Create(backend_->model().config());
  std::vector<float> logits;
  const auto prompt = absl::MakeConstSpan(prompt_);
  for (size_t begin = 0; begin < prompt.size(); begin += 100) {
    const size_t n = std::min<size_t>(100, prompt.size() - begin);
    const bool last = begin + n == prompt.size();
    ForwardSegment seg{&state, prompt.subspan(begin, n),
                       last ? LogitsMode::kLast : LogitsMode::kNone};
    ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
  }
  Sampler sampler;
  std::vector<int32_t> tokens;
  int32_t tok = sampler.Sample(SamplingParams{}, logits, state.position);
  tokens.push_back(tok);
  while (tokens.size() < expected.size()) {
    ForwardSegment seg{&state, {&tok, 1}, LogitsMode::kLast};
    ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
    tok = sampler.Sample(SamplingParams{}, logits, state.position);
    tokens.push_back(tok);
  }
  EXPECT_EQ(tokens, expected);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest,
                         ::testing::Combine(::testing::Values("yoco-tiny-gret", "yoco-tiny-swa"),
                                            ::testing::Values("cpu", "cuda")),
                         [](const auto& info) {
                           const std::string model = std::get<0>(info.param) == "yoco-tiny-gret"
                                                         ? "GatedRetention"
                                                         : "SlidingWindow";
                           return model + (std::get<1>(info.param) == "cuda" ? "Cuda" : "");
                         });

}  // namespace
}  // namespace yoco
