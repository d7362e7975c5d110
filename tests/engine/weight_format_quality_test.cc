// What holding the weights in fewer bits costs: q8 against bf16 (the format q8 replaces) and
// bf16 against fp32, and what holding the shared K/V in bf16 costs against fp32, on the golden
// sets' random-weight models and their prompts, and on the trained default model
// (models/yoco-docqa-tiny, stored in bf16) with a document-QA prompt.
// Stated as the largest logit error over the prompt's positions (relative to the largest
// logit), the share of positions whose greedy token (argmax) stays the same, and how many of
// the 32 greedy tokens after the prompt stay the same. The bounds leave about 2x room over what
// was measured when they were set (docs/engine.md's quality table holds the measured values).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include "absl/strings/str_format.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/text/byte_tokenizer.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

constexpr char kDocQa[] = "yoco-docqa-tiny";

std::string ModelDir(const std::string& name) {
  if (name == kDocQa) return YOCO_DOCQA_MODEL_DIR;
  const char* dir = std::getenv("YOCO_TEST_DATA_DIR");
  return std::string(dir != nullptr ? dir : YOCO_TEST_DATA_DIR) + "/golden/" + name;
}

std::vector<int32_t> Prompt(const std::string& name) {
  if (name == kDocQa) {  // the task's sentence templates (docqa_task.json) and its Q/A format
    const char* text =
        "The weather in Oslo was windy all week. Greta Novak lives in Porto. The code of Hugo "
        "Adler is 4719. The market opens early on Monday. Karin Vogel works as a tailor. A "
        "quiet wind came down from the hills. The secret code of Zoe Frost is 2086.\n"
        "Q: What is the code of Hugo Adler?\nA:";
    std::vector<int32_t> tokens = {0};  // BOS
    const auto bytes = ByteTokenizer().Encode(text);
    EXPECT_TRUE(bytes.ok());
    if (bytes.ok()) tokens.insert(tokens.end(), bytes->begin(), bytes->end());
    return tokens;
  }
  std::ifstream in(ModelDir(name) + "/tokens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str()).get<std::vector<int32_t>>();
}

struct ModelRun {
  std::vector<float> logits;    // [positions, V], teacher-forced on the golden prompt
  std::vector<int32_t> greedy;  // the greedy continuation of the prompt
};

ModelRun RunModel(const std::string& name, WeightFormat format, KvDtype kv_dtype,
                  const std::vector<int32_t>& prompt, int new_tokens) {
  ModelRun run;
  auto model = Model::Load(ModelDir(name), format, kv_dtype);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return run;
  CpuBackend backend(*model);
  SequenceState state = SequenceState::Create((*model)->config());
  ForwardSegment seg{&state, prompt, LogitsMode::kAll};
  EXPECT_TRUE(backend.Forward({&seg, 1}, &run.logits).ok());
  GenerateOptions options;
  options.max_new_tokens = new_tokens;
  auto tokens = Generate(backend, prompt, options);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  if (tokens.ok()) run.greedy = *tokens;
  return run;
}

int64_t Argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

// (golden set, form under test, form it is measured against, bounds).
struct Case {
  std::string golden;  // a golden set, or kDocQa
  WeightFormat format;
  WeightFormat against;
  double max_relative_error;    // max |Δlogit| / max |logit|
  double min_argmax_agreement;  // share of positions
  int min_greedy_prefix;        // leading greedy tokens that agree (of 32)
  KvDtype kv = KvDtype::kF32;   // the K/V under test; the other side holds fp32 K/V
};

class WeightFormatQualityTest : public ::testing::TestWithParam<Case> {};

TEST_P(WeightFormatQualityTest, LogitErrorAndGreedyAgreementWithinBounds) {
  const Case& c = GetParam();
  constexpr int kNewTokens = 32;
  const std::vector<int32_t> prompt = Prompt(c.golden);
  const ModelRun got = RunModel(c.golden, c.format, c.kv, prompt, kNewTokens);
  const ModelRun want = RunModel(c.golden, c.against, KvDtype::kF32, prompt, kNewTokens);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  ASSERT_FALSE(want.logits.empty());
  const int64_t V = static_cast<int64_t>(want.logits.size() / prompt.size());

  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < want.logits.size(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(got.logits[i] - want.logits[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(want.logits[i])));
  }
  int agree = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    agree += Argmax(&got.logits[p * V], V) == Argmax(&want.logits[p * V], V);
  }
  const double agreement = static_cast<double>(agree) / static_cast<double>(prompt.size());
  int prefix = 0;
  while (prefix < kNewTokens && prefix < static_cast<int>(got.greedy.size()) &&
         prefix < static_cast<int>(want.greedy.size()) &&
         got.greedy[prefix] == want.greedy[prefix]) {
    ++prefix;
  }
  const std::string summary = absl::StrFormat(
      "%s, %s (K/V %s) against %s (K/V f32): max logit error %.3e (%.3f%% of max |logit| %.3f), "
      "argmax agreement %d/%d, greedy tokens agreeing %d/%d",
      c.golden, WeightFormatName(c.format), KvDtypeName(c.kv), WeightFormatName(c.against), max_err,
      100 * max_err / max_ref, max_ref, agree, prompt.size(), prefix, kNewTokens);
  std::cout << summary << "\n";
  RecordProperty("quality", summary);
  EXPECT_LE(max_err, c.max_relative_error * max_ref) << summary;
  EXPECT_GE(agreement, c.min_argmax_agreement) << summary;
  EXPECT_GE(prefix, c.min_greedy_prefix) << summary;
}

INSTANTIATE_TEST_SUITE_P(
    Golden, WeightFormatQualityTest,
    ::testing::Values(
        Case{"yoco-tiny-gret", WeightFormat::kQ8, WeightFormat::kBF16, 0.015, 0.95, 16},
        Case{"yoco-tiny-swa", WeightFormat::kQ8, WeightFormat::kBF16, 0.015, 0.95, 16},
        Case{"yoco-tiny-gret", WeightFormat::kBF16, WeightFormat::kF32, 0.01, 0.97, 16},
        Case{"yoco-tiny-swa", WeightFormat::kBF16, WeightFormat::kF32, 0.01, 0.97, 16},
        Case{kDocQa, WeightFormat::kQ8, WeightFormat::kAsStored, 0.03, 0.98, 24},
        Case{"yoco-tiny-gret", WeightFormat::kF32, WeightFormat::kF32, 0.0015, 0.98, 24,
             KvDtype::kBF16},
        Case{"yoco-tiny-swa", WeightFormat::kF32, WeightFormat::kF32, 0.001, 0.98, 24,
             KvDtype::kBF16},
        Case{kDocQa, WeightFormat::kAsStored, WeightFormat::kAsStored, 0.002, 0.98, 24,
             KvDtype::kBF16}),
    [](const auto& info) {
      const Case& c = info.param;
      const std::string model = c.golden == kDocQa             ? "TrainedDocQa"
                                : c.golden == "yoco-tiny-gret" ? "GatedRetention"
                                                               : "SlidingWindow";
      if (c.kv == KvDtype::kBF16) return model + "Bf16KvAgainstF32Kv";
      return model + (c.format == WeightFormat::kQ8 ? "Q8AgainstBf16" : "Bf16AgainstF32");
    });

}  // namespace
}  // namespace yoco
