// Rounds alternate the plain and the constrained steps on copies of one prefilled state, so the
// machine's drift falls on both alike.
#include "tools/bench/structured_bench.h"

#include <chrono>
#include <memory>
#include <random>

#include "absl/strings/str_format.h"
#include "kernels/cpu/gemm.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/engine/random_model.h"
#include "lib/grammar/json_constraint.h"
#include "lib/grammar/regex.h"
#include "lib/grammar/regex_constraint.h"
#include "lib/status/status_macros.h"
#include "lib/text/byte_tokenizer.h"
#include "lib/text/tiktoken_bpe.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

// A record like those RAG code extracts, with strings of any length (so the mask is large).
constexpr char kRecordSchema[] = R"({"type": "object", "additionalProperties": false,
    "required": ["title", "year", "kind", "tags"], "properties": {
    "title": {"type": "string"}, "year": {"type": "integer"},
    "kind": {"enum": ["book", "film", "paper"]},
    "tags": {"type": "array", "items": {"type": "string"}}}})";
// Words, numbers and punctuation: a pattern whose masks are large and reached again and again.
constexpr char kSentencePattern[] = R"((([A-Z]?[a-z]+|[0-9]{1,4})[,;]? ){1,200}[a-z]+\.)";

// A BPE-sized vocabulary: every single byte, then random printable strings of 2-8 bytes (text
// fragments, quotes and brackets among them), the specials empty.
std::vector<std::string> SyntheticVocabulary(int32_t size) {
  std::vector<std::string> bytes(size);
  std::mt19937 rng(7);
  for (int32_t id = 4; id < size; ++id) {
    if (id < 4 + 256) {
      bytes[id] = std::string(1, static_cast<char>(id - 4));
      continue;
    }
    const int n = 2 + static_cast<int>(rng() % 7);
    for (int i = 0; i < n; ++i) bytes[id] += static_cast<char>(' ' + rng() % 95);
  }
  return bytes;
}

double Seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

absl::StatusOr<StructuredBenchReport> RunStructuredBench(const StructuredBenchOptions& o,
                                                         std::ostream& log) {
  RETURN_IF_ERROR(o.config.Validate());
  StructuredBenchReport report;
  report.threads = cpu::KernelThreads();
  log << "making the model..." << std::endl;
  RandomModelOptions random;
  random.seed = 1;
  random.dtype = DType::kBF16;
  RETURN_IF_ERROR(WriteRandomModel(o.config, random, o.work_dir));
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                   Model::Load(o.work_dir, WeightFormat::kBF16, o.config.kv_dtype));
  CpuBackend backend(model);
  ASSIGN_OR_RETURN(JsonSchema compiled, JsonSchema::Compile(kRecordSchema));
  auto schema = std::make_shared<const JsonSchema>(std::move(compiled));
  ASSIGN_OR_RETURN(CharDfa sentence, CompileRegex(kSentencePattern));

  std::vector<int32_t> prompt(64);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = 4 + static_cast<int32_t>(i * 7 % 200);
  // Greedy by default: the cheapest draw (an argmax), so the ratio is the mask's own cost. A
  // sampled draw costs more without the constraint than with it (it skips the refused tokens).
  SamplingParams sampling;
  sampling.temperature = o.temperature;
  report.temperature = o.temperature;
  int32_t first = -1;
  ASSIGN_OR_RETURN(Generation prefilled, Generation::Prefill(backend, prompt, sampling, &first));

  std::vector<std::pair<std::string, std::vector<std::string>>> vocabularies = {
      {"bytes", TokenBytes(ByteTokenizer(), o.config.vocab_size)},
      {"synthetic-bpe", SyntheticVocabulary(o.config.vocab_size)}};
  if (!o.tiktoken_ranks.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<TiktokenBpe> bpe,
                     TiktokenBpe::Load(o.tiktoken_ranks, kCl100kPattern, YocoSpecialTokens()));
    if (bpe->id_limit() > o.config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("the ranks need a vocabulary of ",
                                                     bpe->id_limit(), " ids; the shape has ",
                                                     o.config.vocab_size));
    }
    vocabularies.push_back({"tiktoken", TokenBytes(*bpe, o.config.vocab_size)});
  }
  for (const auto& [name, bytes] : vocabularies) {
    auto vocabulary = std::make_shared<const TokenVocabulary>(bytes);
    for (const char* kind : {"json", "regex"}) {
      for (int batch : o.batches) {
        log << "decoding " << name << " with " << kind << " at batch " << batch << "..."
            << std::endl;
        std::vector<double> plain, constrained, cost;
        for (int round = 0; round < o.rounds; ++round) {
          double seconds[2];
          for (int with = 0; with < 2; ++with) {
            std::vector<Generation> gens(batch, prefilled);
            // Masks shared by the batch, as a worker shares them, and cold each round.
            auto json_masks = std::make_shared<const JsonMasks>(schema, vocabulary);
            auto regex_masks = std::make_shared<const RegexMasks>(sentence, vocabulary);
            std::vector<Generation*> ptrs;
            for (int b = 0; b < batch; ++b) {
              SamplingParams s = sampling;
              s.seed = static_cast<uint64_t>(b);
              gens[b].set_sampling(s);
              if (with == 1 && kind == std::string("json")) {
                auto c = std::make_unique<JsonConstraint>(json_masks, kEosId);
                c->Accept(first);  // a '{' or not: the steps go on either way
                gens[b].set_constraint(std::move(c));
              } else if (with == 1) {
                gens[b].set_constraint(std::make_unique<RegexConstraint>(regex_masks, kEosId));
              }
              ptrs.push_back(&gens[b]);
            }
            std::vector<int32_t> tokens;
            RETURN_IF_ERROR(Generation::NextBatch(backend, ptrs, &tokens));  // warm-up
            const auto start = std::chrono::steady_clock::now();
            for (int step = 0; step < o.steps; ++step) {
              RETURN_IF_ERROR(Generation::NextBatch(backend, ptrs, &tokens));
            }
            seconds[with] = Seconds(start);
          }
          plain.push_back(batch * o.steps / seconds[0]);
          constrained.push_back(batch * o.steps / seconds[1]);
          cost.push_back(seconds[1] / seconds[0]);
        }
        StructuredMeasurement m;
        m.vocabulary = name;
        m.constraint = kind;
        m.vocabulary_tokens = vocabulary->size();
        m.batch = batch;
        m.plain_tokens_per_s = SpreadOf(plain).median;
        m.constrained_tokens_per_s = SpreadOf(constrained).median;
        m.cost = SpreadOf(cost);
        report.rows.push_back(m);
      }
    }
  }
  return report;
}

std::string StructuredBenchReport::ToTable() const {
  std::string out = absl::StrFormat(
      "structured output (%d threads, temperature %.2f): constrained decode time over "
      "plain, per round (target <= 1.5)\n",
      threads, temperature);
  out += absl::StrFormat("%-14s %-6s %7s %6s %12s %12s %22s\n", "vocabulary", "rule", "tokens",
                         "batch", "plain tok/s", "ruled tok/s", "cost median [min, max]");
  for (const StructuredMeasurement& m : rows) {
    out += absl::StrFormat("%-14s %-6s %7d %6d %12.1f %12.1f %10.2f [%.2f, %.2f]\n", m.vocabulary,
                           m.constraint, m.vocabulary_tokens, m.batch, m.plain_tokens_per_s,
                           m.constrained_tokens_per_s, m.cost.median, m.cost.min, m.cost.max);
  }
  return out;
}

std::string StructuredBenchReport::ToJson() const {
  nlohmann::json j = {
      {"threads", threads}, {"temperature", temperature}, {"rows", nlohmann::json::array()}};
  for (const StructuredMeasurement& m : rows) {
    j["rows"].push_back({{"vocabulary", m.vocabulary},
                         {"constraint", m.constraint},
                         {"vocabulary_tokens", m.vocabulary_tokens},
                         {"batch", m.batch},
                         {"plain_tokens_per_s", m.plain_tokens_per_s},
                         {"constrained_tokens_per_s", m.constrained_tokens_per_s},
                         {"cost_median", m.cost.median},
                         {"cost_min", m.cost.min},
                         {"cost_max", m.cost.max}});
  }
  return j.dump(2) + "\n";
}

}  // namespace yoco
