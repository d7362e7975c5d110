// Sub-command implementations: parse flags, call the engine, report.
#include "tools/yoco/commands.h"

#include <fstream>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/gemm.h"
#include "lib/cache/block_key.h"
#include "lib/engine/backend_choice.h"
#include "lib/engine/cpu_backend.h"
#include "tools/bench/attention_bench.h"
#include "tools/bench/engine_bench.h"
#include "tools/bench/prefix_cache_bench.h"
#include "tools/bench/structured_bench.h"
#ifdef YOCO_HAVE_CUDA
#include "tools/bench/cuda_engine_bench.h"
#endif
#include "lib/engine/generation.h"
#include "lib/engine/model.h"
#include "lib/engine/npy.h"
#include "lib/engine/random_model.h"
#include "lib/files/temp_folder.h"
#include "lib/status/status_macros.h"
#include "tools/yoco/command_line.h"

namespace yoco {
namespace {

// --backend cpu|cuda, --device N, --threads T.
absl::StatusOr<BackendChoice> ReadBackendChoice(const CommandLine& cl) {
  BackendChoice choice;
  if (cl.Has("backend")) {
    ASSIGN_OR_RETURN(choice.kind, ParseBackendKind(*cl.String("backend")));
  }
  ASSIGN_OR_RETURN(int64_t threads, cl.Int("threads", 0));
  if (threads < 0 || threads > 1024)
    return absl::InvalidArgumentError("--threads must be in [0, 1024]");
  ASSIGN_OR_RETURN(int64_t device, cl.Int("device", 0));
  if (device < 0 || device > 1024) return absl::InvalidArgumentError("--device must be >= 0");
  choice.threads = static_cast<int>(threads);
  choice.device = static_cast<int>(device);
  return choice;
}

absl::StatusOr<std::unique_ptr<Backend>> LoadBackend(const CommandLine& cl) {
  ASSIGN_OR_RETURN(std::string dir, cl.String("model"));
  ASSIGN_OR_RETURN(BackendChoice choice, ReadBackendChoice(cl));
  WeightFormat weights = WeightFormat::kAsStored;
  if (cl.Has("weights")) {
    ASSIGN_OR_RETURN(weights, ParseWeightFormat(*cl.String("weights")));
  }
  KvDtype kv_dtype = KvDtype::kF32;
  if (cl.Has("kv-dtype")) {
    ASSIGN_OR_RETURN(kv_dtype, ParseKvDtype(*cl.String("kv-dtype")));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::Load(dir, weights, kv_dtype));
  return MakeBackend(std::move(model), choice);
}

// --tokens 0,17,5, or --tokens-file F (ids separated by commas or white space: a long
// sequence does not fit one command-line argument, 128 KB on Linux).
absl::StatusOr<std::vector<int32_t>> ReadTokens(const CommandLine& cl, const ModelConfig& config) {
  std::vector<int32_t> tokens;
  if (cl.Has("tokens-file")) {
    if (cl.Has("tokens")) return absl::InvalidArgumentError("give --tokens or --tokens-file");
    ASSIGN_OR_RETURN(std::string path, cl.String("tokens-file"));
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("--tokens-file: cannot open ", path));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (absl::string_view word :
         absl::StrSplit(text, absl::ByAnyChar(", \t\r\n"), absl::SkipEmpty())) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(word, &id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tokens-file: '", word, "' is not a token id"));
      }
      tokens.push_back(id);
    }
    if (tokens.empty()) return absl::InvalidArgumentError("--tokens-file: no token ids");
  } else {
    ASSIGN_OR_RETURN(tokens, cl.IntList("tokens"));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tokens: id ", t, " is outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  return tokens;
}

}  // namespace

absl::Status RunInitModel(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(CommandLine cl, CommandLine::Parse(args, {"params", "seed", "out", "dtype"}));
  ASSIGN_OR_RETURN(std::string params, cl.String("params"));
  ASSIGN_OR_RETURN(std::string out, cl.String("out"));
  ASSIGN_OR_RETURN(uint64_t seed, cl.Uint64("seed", std::nullopt));
  RandomModelOptions options;
  options.seed = seed;
  const std::string dtype = cl.Has("dtype") ? *cl.String("dtype") : "f32";
  if (dtype == "f32") {
    options.dtype = DType::kF32;
  } else if (dtype == "bf16") {
    options.dtype = DType::kBF16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype must be f32 or bf16, got '", dtype, "'"));
  }
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromFile(params));
  return WriteRandomModel(config, options, out);
}

absl::Status RunLogits(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(CommandLine cl, CommandLine::Parse(args, {"model", "tokens", "tokens-file",
                                                             "last", "out", "threads", "backend",
                                                             "device", "weights", "kv-dtype"}));
  ASSIGN_OR_RETURN(std::string out, cl.String("out"));
  ASSIGN_OR_RETURN(auto backend, LoadBackend(cl));
  const ModelConfig& config = backend->model().config();
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, ReadTokens(cl, config));
  const auto n = static_cast<int64_t>(tokens.size());
  // --last N: the logits of the last N positions only (a long sequence's full logits are large).
  ASSIGN_OR_RETURN(int64_t last, cl.Int("last", n));
  if (last < 1 || last > n) {
    return absl::InvalidArgumentError(absl::StrCat("--last must be in [1, ", n, "]"));
  }
  SequenceState state = SequenceState::Create(config);
  ForwardSegment seg{&state, tokens, LogitsMode::kAll};
  std::vector<float> logits;
  RETURN_IF_ERROR(backend->Forward({&seg, 1}, &logits));
  return WriteNpy(out, {last, config.vocab_size}, logits.data() + (n - last) * config.vocab_size);
}

absl::Status RunGenerate(const std::vector<std::string>& args, std::ostream& out) {
  ASSIGN_OR_RETURN(CommandLine cl,
                   CommandLine::Parse(args,
                                      {"model", "tokens", "tokens-file", "max-new-tokens",
                                       "temperature", "top-k", "top-p", "seed", "stop-tokens",
                                       "threads", "backend", "device", "weights", "kv-dtype"},
                                      {"stop-at-eos"}));
  ASSIGN_OR_RETURN(int64_t max_new, cl.Int("max-new-tokens", std::nullopt));
  if (max_new < 0 || max_new > (1 << 24)) {
    return absl::InvalidArgumentError("--max-new-tokens must be in [0, 16777216]");
  }
  GenerateOptions options;
  options.max_new_tokens = static_cast<int>(max_new);
  options.stop_at_eos = cl.Has("stop-at-eos");
  ASSIGN_OR_RETURN(double temperature, cl.Double("temperature", 0.0));
  ASSIGN_OR_RETURN(int64_t top_k, cl.Int("top-k", 0));
  ASSIGN_OR_RETURN(double top_p, cl.Double("top-p", 1.0));
  ASSIGN_OR_RETURN(uint64_t seed, cl.Uint64("seed", 0));
  if (top_k < 0 || top_k > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("--top-k must be >= 0");
  }
  options.sampling.temperature = static_cast<float>(temperature);
  options.sampling.top_k = static_cast<int32_t>(top_k);
  options.sampling.top_p = static_cast<float>(top_p);
  options.sampling.seed = seed;
  if (cl.Has("stop-tokens")) {
    ASSIGN_OR_RETURN(options.sampling.stop_token_ids, cl.IntList("stop-tokens"));
  }
  ASSIGN_OR_RETURN(auto backend, LoadBackend(cl));
  const ModelConfig& config = backend->model().config();
  RETURN_IF_ERROR(options.sampling.Validate(config.vocab_size));
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, ReadTokens(cl, config));
  ASSIGN_OR_RETURN(std::vector<int32_t> generated, Generate(*backend, tokens, options));
  out << absl::StrJoin(generated, ",") << "\n";
  return absl::OkStatus();
}

namespace {

// The setup of `yoco bench` and `bench-cache`: ReadBenchConfig's shape, the weight format and
// a fresh work folder for the random checkpoint, removed with the setup.
struct BenchSetup {
  ModelConfig config;
  WeightFormat weights = WeightFormat::kBF16;
  std::optional<TempFolder> work;
};

// The flags every benchmark shares: the model shape (--params, --kv-dtype over the shape's own)
// and the kernel threads, set here.
absl::StatusOr<ModelConfig> ReadBenchConfig(const CommandLine& cl) {
  ModelConfig config = DefaultBenchConfig();
  if (cl.Has("params")) {
    ASSIGN_OR_RETURN(config, ModelConfig::FromFile(*cl.String("params")));
  }
  ASSIGN_OR_RETURN(int64_t threads, cl.Int("threads", 0));
  if (threads < 0 || threads > 1024)
    return absl::InvalidArgumentError("--threads must be in [0, 1024]");
  cpu::SetKernelThreads(static_cast<int>(threads));
  if (cl.Has("kv-dtype")) {
    ASSIGN_OR_RETURN(config.kv_dtype, ParseKvDtype(*cl.String("kv-dtype")));
  }
  return config;
}

absl::StatusOr<BenchSetup> ParseBenchSetup(const CommandLine& cl, const char* work_prefix) {
  BenchSetup setup;
  ASSIGN_OR_RETURN(setup.config, ReadBenchConfig(cl));
  const std::string weights = cl.Has("weights") ? *cl.String("weights") : "bf16";
  if (weights != "bf16" && weights != "f32" && weights != "q8") {
    return absl::InvalidArgumentError("--weights must be bf16, f32 or q8");
  }
  ASSIGN_OR_RETURN(setup.weights, ParseWeightFormat(weights));
  ASSIGN_OR_RETURN(TempFolder work, TempFolder::Create(work_prefix));
  setup.work = std::move(work);
  return setup;
}

// Prints a report's table and, with --json, writes its JSON.
template <typename Report>
absl::Status WriteBenchReport(const CommandLine& cl, const Report& report, std::ostream& out) {
  out << report.ToTable();
  if (cl.Has("json")) {
    std::ofstream json(*cl.String("json"), std::ios::trunc);
    json << report.ToJson();
    if (!json) return absl::PermissionDeniedError("cannot write " + *cl.String("json"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// `yoco bench --backend cuda`: the GPU benchmark on the YOCO-3B shape unless --params says
// otherwise.
absl::Status RunCudaBench(const CommandLine& cl, std::ostream& out, std::ostream& log) {
#ifdef YOCO_HAVE_CUDA
  CudaEngineBenchOptions options;
  options.config = Yoco3bConfig();
  if (cl.Has("params")) {
    ASSIGN_OR_RETURN(options.config, ModelConfig::FromFile(*cl.String("params")));
  }
  ASSIGN_OR_RETURN(BackendChoice choice, ReadBackendChoice(cl));
  options.device = choice.device;
  if (cl.Has("prefill-lengths")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> lengths, cl.IntList("prefill-lengths"));
    options.prefill_lengths.assign(lengths.begin(), lengths.end());
  }
  if (cl.Has("decode-batches")) {
    ASSIGN_OR_RETURN(options.decode_batches, cl.IntList("decode-batches"));
  }
  if (cl.Has("decode-contexts")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> contexts, cl.IntList("decode-contexts"));
    options.decode_contexts.assign(contexts.begin(), contexts.end());
  }
  ASSIGN_OR_RETURN(int64_t steps, cl.Int("decode-steps", 16));
  options.decode_steps = static_cast<int>(steps);
  for (int64_t n : options.prefill_lengths) {
    if (n < 1 || n > (1 << 22))
      return absl::InvalidArgumentError("--prefill-lengths must be in [1, 4194304]");
  }
  for (int64_t n : options.decode_contexts) {
    if (n < 1 || n > (1 << 22))
      return absl::InvalidArgumentError("--decode-contexts must be in [1, 4194304]");
  }
  for (int b : options.decode_batches) {
    if (b < 1 || b > 4096)
      return absl::InvalidArgumentError("--decode-batches must be in [1, 4096]");
  }
  if (steps < 1 || steps > 10000)
    return absl::InvalidArgumentError("--decode-steps must be in [1, 10000]");
  ASSIGN_OR_RETURN(CudaEngineBenchReport report, RunCudaEngineBench(options, log));
  return WriteBenchReport(cl, report, out);
#else
  return absl::UnavailableError("--backend cuda: this build has no CUDA backend");
#endif
}

}  // namespace

absl::Status RunBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& log) {
  ASSIGN_OR_RETURN(
      CommandLine cl,
      CommandLine::Parse(args,
                         {"params", "threads", "json", "weights", "kv-dtype", "decode-steps",
                          "decode-rounds", "prefill-lengths", "decode-batches", "decode-context",
                          "decode-contexts", "backend", "device"},
                         {"long"}));
  if (cl.Has("backend")) {
    ASSIGN_OR_RETURN(BackendKind kind, ParseBackendKind(*cl.String("backend")));
    if (kind == BackendKind::kCuda) return RunCudaBench(cl, out, log);
  }
  EngineBenchOptions options;
  ASSIGN_OR_RETURN(int64_t steps, cl.Int("decode-steps", 8));
  if (steps < 1 || steps > 10000)
    return absl::InvalidArgumentError("--decode-steps must be in [1, 10000]");
  options.decode_steps = static_cast<int>(steps);
  ASSIGN_OR_RETURN(int64_t rounds, cl.Int("decode-rounds", 3));
  if (rounds < 1 || rounds > 100)
    return absl::InvalidArgumentError("--decode-rounds must be in [1, 100]");
  options.decode_rounds = static_cast<int>(rounds);
  if (cl.Has("prefill-lengths")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> lengths, cl.IntList("prefill-lengths"));
    options.prefill_lengths.assign(lengths.begin(), lengths.end());
  }
  if (cl.Has("decode-batches")) {
    ASSIGN_OR_RETURN(options.decode_batches, cl.IntList("decode-batches"));
  }
  ASSIGN_OR_RETURN(options.decode_context, cl.Int("decode-context", 2048));
  for (int64_t n : options.prefill_lengths) {
    if (n < 1 || n > (1 << 20))
      return absl::InvalidArgumentError("--prefill-lengths must be in [1, 1048576]");
  }
  for (int b : options.decode_batches) {
    if (b < 1 || b > 4096)
      return absl::InvalidArgumentError("--decode-batches must be in [1, 4096]");
  }
  if (options.decode_context < 1 || options.decode_context > (1 << 20)) {
    return absl::InvalidArgumentError("--decode-context must be in [1, 1048576]");
  }
  if (cl.Has("long")) options.prefill_lengths.push_back(32768);
  ASSIGN_OR_RETURN(BenchSetup setup, ParseBenchSetup(cl, "yoco-bench"));
  options.config = setup.config;
  options.weights = setup.weights;
  options.work_dir = setup.work->path();
  ASSIGN_OR_RETURN(EngineBenchReport report, RunEngineBench(options, log));
  return WriteBenchReport(cl, report, out);
}

absl::Status RunBenchCache(const std::vector<std::string>& args, std::ostream& out,
                           std::ostream& log) {
  ASSIGN_OR_RETURN(
      CommandLine cl,
      CommandLine::Parse(
          args, {"params", "threads", "json", "weights", "kv-dtype", "document-lengths"}, {}));
  PrefixCacheBenchOptions options;
  if (cl.Has("document-lengths")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> lengths, cl.IntList("document-lengths"));
    options.document_lengths.assign(lengths.begin(), lengths.end());
  }
  for (int64_t n : options.document_lengths) {
    if (n < kCacheBlockTokens || n > (1 << 20)) {
      return absl::InvalidArgumentError("--document-lengths must be in [128, 1048576]");
    }
  }
  ASSIGN_OR_RETURN(BenchSetup setup, ParseBenchSetup(cl, "yoco-bench-cache"));
  options.config = setup.config;
  options.weights = setup.weights;
  options.work_dir = setup.work->path();
  ASSIGN_OR_RETURN(PrefixCacheBenchReport report, RunPrefixCacheBench(options, log));
  return WriteBenchReport(cl, report, out);
}

namespace {

// "1x32768,32x2048": batch x context pairs.
absl::StatusOr<std::vector<AttentionBenchShape>> ParseAttentionShapes(const std::string& list,
                                                                      absl::string_view flag) {
  std::vector<AttentionBenchShape> shapes;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, 'x');
    AttentionBenchShape shape;
    int64_t context = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &shape.batch) ||
        !absl::SimpleAtoi(parts[1], &context)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", item, "' is not BATCHxCONTEXT (e.g. 1x32768,32x2048)"));
    }
    if (shape.batch < 1 || shape.batch > 4096 || context < 1 || context > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": '", item, "' needs a batch in [1, 4096] and a context in [1, 1048576]"));
    }
    shape.context = context;
    shapes.push_back(shape);
  }
  return shapes;
}

}  // namespace

absl::Status RunBenchStructured(const std::vector<std::string>& args, std::ostream& out,
                                std::ostream& log) {
  ASSIGN_OR_RETURN(CommandLine cl,
                   CommandLine::Parse(args, {"params", "threads", "json", "rounds", "steps",
                                             "tiktoken-ranks", "temperature"}));
  StructuredBenchOptions options;
  if (cl.Has("tiktoken-ranks")) options.tiktoken_ranks = *cl.String("tiktoken-ranks");
  ASSIGN_OR_RETURN(options.config, ReadBenchConfig(cl));
  ASSIGN_OR_RETURN(int64_t rounds, cl.Int("rounds", 3));
  ASSIGN_OR_RETURN(int64_t steps, cl.Int("steps", 24));
  if (rounds < 1 || rounds > 100) return absl::InvalidArgumentError("--rounds must be in [1, 100]");
  if (steps < 1 || steps > 10000)
    return absl::InvalidArgumentError("--steps must be in [1, 10000]");
  options.rounds = static_cast<int>(rounds);
  options.steps = static_cast<int>(steps);
  ASSIGN_OR_RETURN(double temperature, cl.Double("temperature", 0.0));
  if (!(temperature >= 0.0 && temperature <= 10.0)) {
    return absl::InvalidArgumentError("--temperature must be in [0, 10]");
  }
  options.temperature = static_cast<float>(temperature);
  ASSIGN_OR_RETURN(TempFolder work, TempFolder::Create("yoco_bench_structured"));
  options.work_dir = work.path();
  ASSIGN_OR_RETURN(StructuredBenchReport report, RunStructuredBench(options, log));
  return WriteBenchReport(cl, report, out);
}

absl::Status RunBenchAttention(const std::vector<std::string>& args, std::ostream& out,
                               std::ostream& log) {
  ASSIGN_OR_RETURN(CommandLine cl,
                   CommandLine::Parse(args, {"params", "threads", "json", "kv-dtype", "shapes",
                                             "shared", "rounds"}));
  AttentionBenchOptions options;
  ASSIGN_OR_RETURN(options.config, ReadBenchConfig(cl));
  if (!cl.Has("kv-dtype")) options.config.kv_dtype = KvDtype::kBF16;
  if (cl.Has("shapes")) {
    ASSIGN_OR_RETURN(options.shapes, ParseAttentionShapes(*cl.String("shapes"), "--shapes"));
  }
  if (cl.Has("shared")) {
    if (*cl.String("shared") == "none") {
      options.shared.clear();
    } else {
      ASSIGN_OR_RETURN(options.shared, ParseAttentionShapes(*cl.String("shared"), "--shared"));
    }
  }
  ASSIGN_OR_RETURN(int64_t rounds, cl.Int("rounds", 5));
  if (rounds < 1 || rounds > 100) return absl::InvalidArgumentError("--rounds must be in [1, 100]");
  options.rounds = static_cast<int>(rounds);
  ASSIGN_OR_RETURN(AttentionBenchReport report, RunAttentionBench(options, log));
  return WriteBenchReport(cl, report, out);
}

}  // namespace yoco
