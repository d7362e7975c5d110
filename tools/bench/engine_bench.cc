// The benchmark. Decode batches copy one prefilled sequence's state, since decode speed does
// not depend on the cached values and prefilling 32 contexts would dominate the run.
#include "tools/bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/gated_retention.h"
#include "kernels/cpu/gemm.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/random_model.h"
#include "lib/engine/sampler.h"
#include "lib/status/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/baseline/transformer_baseline.h"
#include "tools/bench/bench_tokens.h"
#include "tools/bench/machine_rates.h"

namespace yoco {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What a decode step must read and compute: its matrices once, multiplied with each sequence's
// row, and each sequence's state. Its least time at a read bandwidth is the floor (bytes alone)
// or the bound (the products also no faster than the sgemm rate).
struct StepCost {
  double weight_bytes = 0;
  double flops_per_row = 0;
  double state_bytes = 0;  // per sequence

  double ProductsSeconds(int batch, double bytes_per_s, double flops_per_s) const {
    return std::max(weight_bytes / bytes_per_s, batch * flops_per_row / flops_per_s);
  }
  double FloorSeconds(int batch, double bytes_per_s) const {
    return (weight_bytes + batch * state_bytes) / bytes_per_s;
  }
  double BoundSeconds(int batch, double bytes_per_s, double flops_per_s) const {
    return ProductsSeconds(batch, bytes_per_s, flops_per_s) + batch * state_bytes / bytes_per_s;
  }
};

// A prompt: BOS, then bench tokens.
std::vector<int32_t> BenchPrompt(int64_t n, int vocab) {
  std::vector<int32_t> t = BenchTokens(n, vocab, 88172645463325252ull);
  t[0] = kBosId;
  return t;
}

// Timed runs of `fn`: at least two, more while under `budget_s`, best time kept. The first run
// of a length pays for the backend's fresh buffers (at 8192 tokens about 200 MB of activations
// and FFN scratch, faulted in page by page): where one run filled the budget, that run was the
// figure, and YOCO's prefill read 2135-2247 tok/s at 8192 against 2978-3714 with two runs.
template <typename Fn>
double BestSeconds(Fn fn, double budget_s) {
  double best = 1e30, spent = 0;
  int runs = 0;
  do {
    const double t0 = Seconds();
    fn();
    const double t = Seconds() - t0;
    best = std::min(best, t);
    spent += t;
    ++runs;
  } while (runs < 2 || spent + best < budget_s);
  return best;
}

}  // namespace

ModelConfig DefaultBenchConfig() {
  ModelConfig c;
  c.dim = 768;
  c.n_layers = 12;
  c.hidden_dim = 2048;
  c.n_self_heads = 6;
  c.n_attn_heads = 12;
  c.n_attn_kv_heads = 4;
  c.vocab_size = 32000;
  return c;
}

double YocoPrefillFlops(const ModelConfig& c, int64_t n) {
  const double D = c.dim, F = c.hidden_dim, V = c.vocab_size, KV = c.kv_dim();
  const double ds = c.self_head_dim(), da = c.cross_head_dim();
  const bool gret = c.self_attention() == SelfAttentionKind::kGatedRetention;
  const double self_params =
      gret ? 5 * D * D + c.n_self_heads * D + 3 * D * F : 4 * D * D + 3 * D * F;
  double flops = n * c.n_self_layers() * 2 * self_params;  // projections and FFNs
  for (int64_t c0 = 0; c0 < n; c0 += cpu::kRetentionChunk) {
    const double m = std::min<int64_t>(cpu::kRetentionChunk, n - c0);
    const double per_head = gret ? 4 * m * m * ds + 4 * m * ds * ds : 0;
    flops += per_head * c.n_self_heads * c.n_self_layers();
  }
  if (!gret) {  // windowed attention: scores and weighted sum over ≤ W keys per query
    const double w = *c.sliding_window;
    flops += 4.0 * n * std::min<double>(w, n) * D * c.n_self_layers();
  }
  flops += n * 2 * 2 * D * KV;  // shared K/V
  flops += c.n_cross_layers() *
           (2 * (2 * D * D + 3 * D * F) + 4.0 * n * da * c.n_attn_heads);  // last row
  flops += 2 * V * D;                                                      // logits
  return flops;
}

absl::StatusOr<EngineBenchReport> RunEngineBench(const EngineBenchOptions& o, std::ostream& log) {
  const ModelConfig& config = o.config;
  RETURN_IF_ERROR(config.Validate());
  EngineBenchReport report;
  report.threads = cpu::KernelThreads();
  report.weights = WeightFormatName(o.weights);
  report.kv_dtype = KvDtypeName(config.kv_dtype);

  log << "measuring sgemm and memory bandwidth..." << std::endl;
  SgemmProbe sgemm_probe;  // measured again next to every decode round
  report.sgemm_gflops = sgemm_probe.MeasureGflops();
  report.membw_gbs = MeasureReadBandwidthGbs();

  log << "making the models..." << std::endl;
  RandomModelOptions random;
  random.seed = 1;
  random.dtype = o.weights == WeightFormat::kF32 ? DType::kF32 : DType::kBF16;
  RETURN_IF_ERROR(WriteRandomModel(config, random, o.work_dir));
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                   Model::Load(o.work_dir, o.weights, config.kv_dtype));
  CpuBackend yoco(model);
  CpuBackend fastest(model, {.batch_invariant = false});
  CpuBackend profiled(model, {.profile = true});
  TransformerBaseline transformer(config, o.weights, 2);
  std::vector<float> logits;

  SequenceState decode_seed_yoco;
  TransformerBaseline::Sequence decode_seed_transformer;
  for (int64_t n : o.prefill_lengths) {
    const std::vector<int32_t> tokens = BenchPrompt(n, config.vocab_size);
    SequenceState ys;
    const double yt = BestSeconds(
        [&] {
          ys = SequenceState::Create(config);
          ForwardSegment seg{&ys, tokens, LogitsMode::kLast};
          (void)yoco.Forward({&seg, 1}, &logits);
        },
        3.0);
    TransformerBaseline::Sequence ts;
    const double tt = BestSeconds(
        [&] {
          ts = transformer.NewSequence();
          TransformerBaseline::Sequence* p = &ts;
          absl::Span<const int32_t> span = tokens;
          (void)transformer.Forward({&p, 1}, {&span, 1}, &logits);
        },
        3.0);
    report.prefill.push_back({n, n / yt, n / tt, YocoPrefillFlops(config, n) / yt / 1e9});
    report.cache_bytes.push_back({n, ys.bytes(), ts.bytes()});
    log << absl::StrFormat("prefill n=%d: yoco %.1f tok/s, transformer %.1f tok/s", n, n / yt,
                           n / tt)
        << std::endl;
    if (n == o.decode_context) {
      decode_seed_yoco = std::move(ys);
      decode_seed_transformer = std::move(ts);
    }
  }
  if (decode_seed_yoco.position != o.decode_context) {
    // A context not prefilled above gets states of its size with made-up contents: a decode
    // step's time does not depend on the values, and prefilling the Transformer at 32K tokens
    // would take minutes.
    log << "making decode states at context " << o.decode_context << "..." << std::endl;
    const int64_t n = o.decode_context;
    std::vector<float> rows(n * config.kv_dim());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = std::sin(0.37 * static_cast<double>(i));
    decode_seed_yoco = SequenceState::Create(config);
    decode_seed_yoco.position = n;
    decode_seed_yoco.shared_k.Append(rows.data(), n);
    decode_seed_yoco.shared_v.Append(rows.data(), n);
    decode_seed_transformer = transformer.NewSequence();
    decode_seed_transformer.position = n;
    for (size_t l = 0; l < decode_seed_transformer.k.size(); ++l) {
      decode_seed_transformer.k[l].Append(rows.data(), n);
      decode_seed_transformer.v[l].Append(rows.data(), n);
    }
  }

  // Per step: every matrix but the embedding (one row per token) is read once, and multiplied
  // with every sequence's row. Per sequence, YOCO's cross layers each read the whole shared K/V
  // and its self-decoder states are read and written; each Transformer layer reads its own K/V.
  const ModelWeights& weights = model->weights();
  StepCost yoco_cost;
  yoco_cost.weight_bytes = weights.matrix_bytes() - weights.embed.bytes();
  yoco_cost.flops_per_row =
      2.0 * (weights.matrix_params() - weights.embed.rows * weights.embed.cols);
  const SequenceState& seed = decode_seed_yoco;
  const double kv_bytes = seed.shared_k.bytes() + seed.shared_v.bytes();
  const double step_attention_bytes = config.n_cross_layers() * kv_bytes;
  yoco_cost.state_bytes = step_attention_bytes + 2 * (seed.bytes() - kv_bytes);
  StepCost transformer_cost;
  for (const cpu::WeightMatrix* w : transformer.step_matrices()) {
    transformer_cost.weight_bytes += w->bytes();
    transformer_cost.flops_per_row += 2.0 * w->rows * w->cols;
  }
  transformer_cost.state_bytes = decode_seed_transformer.bytes();
  const ReadBandwidthProbe membw_probe(int64_t{256} << 20);
  for (int batch : o.decode_batches) {
    const int steps = o.decode_steps;
    const int rounds = std::max(o.decode_rounds, 1);
    // The first step, then each round's (YOCO's twice: batch-invariant and not) and the profile's
    // warm-up step and timed steps.
    const int64_t grown = 1 + int64_t{2 * rounds + 1} * (steps + 1);
    std::vector<SequenceState> ys(batch, decode_seed_yoco);
    std::vector<TransformerBaseline::Sequence> ts(batch, decode_seed_transformer);
    for (auto& s : ys) {
      s.shared_k.Reserve(s.shared_k.rows() + grown);
      s.shared_v.Reserve(s.shared_v.rows() + grown);
    }
    for (auto& s : ts) {
      for (auto& layer : s.k) layer.Reserve(layer.rows() + grown);
      for (auto& layer : s.v) layer.Reserve(layer.rows() + grown);
    }
    std::vector<int32_t> step_tokens(batch, 7);
    std::vector<ForwardSegment> segments;
    std::vector<TransformerBaseline::Sequence*> tptr;
    std::vector<absl::Span<const int32_t>> tspans;
    for (int b = 0; b < batch; ++b) {
      segments.push_back({&ys[b], {&step_tokens[b], 1}, LogitsMode::kLast});
      tptr.push_back(&ts[b]);
      tspans.push_back({&step_tokens[b], 1});
    }
    auto yoco_step = [&] { (void)yoco.Forward(segments, &logits); };
    auto fastest_step = [&] { (void)fastest.Forward(segments, &logits); };
    auto transformer_step = [&] { (void)transformer.Forward(tptr, tspans, &logits); };
    yoco_step();
    transformer_step();
    // Each round measures the bandwidth and the sgemm rate next to the steps it bounds: on a
    // shared machine either moves by a third within a minute, and one figure taken at the start
    // skews every ratio after it. Each model's timed steps follow one untimed step, so that
    // what the probes and the other model left in the caches and page tables is not charged to
    // it (on the benchmark's VM the first YOCO step after the probes took up to 1.8x a later
    // one at batch 32 even with the probes' buffers kept). Sequences grow by `steps` + 1 keys a
    // round, which changes a step's cost by a fraction of a percent at the contexts measured.
    std::vector<double> membw, sgemm, yoco_tps, transformer_tps, floor_tps, bound_tps, speedup,
        fraction, transformer_bound_tps, transformer_fraction, ceiling, invariance_cost;
    for (int r = 0; r < rounds; ++r) {
      const double flops_per_s = sgemm_probe.MeasureGflops() * 1e9;
      const double bytes_per_s = membw_probe.MeasureGbs(3) * 1e9;
      yoco_step();
      double t0 = Seconds();
      for (int s = 0; s < steps; ++s) yoco_step();
      const double yt = (Seconds() - t0) / steps;
      fastest_step();
      t0 = Seconds();
      for (int s = 0; s < steps; ++s) fastest_step();
      invariance_cost.push_back(yt / ((Seconds() - t0) / steps));
      transformer_step();
      t0 = Seconds();
      for (int s = 0; s < steps; ++s) transformer_step();
      const double tt = (Seconds() - t0) / steps;
      const double bound = yoco_cost.BoundSeconds(batch, bytes_per_s, flops_per_s);
      const double transformer_bound =
          transformer_cost.BoundSeconds(batch, bytes_per_s, flops_per_s);
      membw.push_back(bytes_per_s / 1e9);
      sgemm.push_back(flops_per_s / 1e9);
      yoco_tps.push_back(batch / yt);
      transformer_tps.push_back(batch / tt);
      floor_tps.push_back(batch / yoco_cost.FloorSeconds(batch, bytes_per_s));
      bound_tps.push_back(batch / bound);
      speedup.push_back(tt / yt);
      fraction.push_back(bound / yt);
      transformer_bound_tps.push_back(batch / transformer_bound);
      transformer_fraction.push_back(transformer_bound / tt);
      ceiling.push_back(transformer_bound / bound);
    }
    DecodeMeasurement m;
    m.batch = batch;
    m.context = o.decode_context;
    m.rounds = rounds;
    m.membw_gbs = SpreadOf(membw).median;
    m.sgemm_gflops = SpreadOf(sgemm).median;
    m.yoco_tokens_per_s = SpreadOf(yoco_tps).median;
    m.transformer_tokens_per_s = SpreadOf(transformer_tps).median;
    m.floor_tokens_per_s = SpreadOf(floor_tps).median;
    m.bound_tokens_per_s = SpreadOf(bound_tps).median;
    m.yoco_over_transformer = SpreadOf(speedup);
    m.bound_fraction = SpreadOf(fraction);
    m.transformer_bound_tokens_per_s = SpreadOf(transformer_bound_tps).median;
    m.transformer_bound_fraction = SpreadOf(transformer_fraction);
    m.yoco_over_transformer_at_bounds = SpreadOf(ceiling).median;
    m.batch_invariance_cost = SpreadOf(invariance_cost);
    // The profiled steps continue the same sequences, one step longer each, after the timed
    // ones (a step's cost hardly depends on a few more keys).
    (void)profiled.Forward(segments, &logits);
    profiled.ResetProfile();
    for (int s = 0; s < steps; ++s) (void)profiled.Forward(segments, &logits);
    const CpuProfile& p = profiled.profile();
    const double bytes_per_s = m.membw_gbs * 1e9;
    m.projection_ms = p.projection_ms / steps;
    m.ffn_ms = p.ffn_ms / steps;
    m.retention_ms = p.retention_ms / steps;
    m.attention_ms = p.attention_ms / steps;
    m.step_ms = p.total_ms / steps;
    m.products_bound_ms = 1e3 * yoco_cost.ProductsSeconds(batch, bytes_per_s, m.sgemm_gflops * 1e9);
    m.attention_bound_ms = 1e3 * batch * step_attention_bytes / bytes_per_s;
    report.decode.push_back(m);
    log << absl::StrFormat(
               "decode batch=%d: yoco %.1f tok/s, transformer %.1f tok/s, floor %.1f, bound %.1f "
               "(medians of %d rounds at sgemm %.0f GFLOP/s, %.1f GB/s; YOCO/bound %.0f-%.0f%%)",
               batch, m.yoco_tokens_per_s, m.transformer_tokens_per_s, m.floor_tokens_per_s,
               m.bound_tokens_per_s, rounds, m.sgemm_gflops, m.membw_gbs,
               100 * m.bound_fraction.min, 100 * m.bound_fraction.max)
        << std::endl;
  }
  return report;
}

std::string EngineBenchReport::ToJson() const {
  nlohmann::ordered_json j;
  j["sgemm_gflops"] = sgemm_gflops;
  j["membw_gbs"] = membw_gbs;
  j["threads"] = threads;
  j["weights"] = weights;
  j["kv_dtype"] = kv_dtype;
  j["prefill"] = nlohmann::json::array();
  for (const auto& p : prefill) {
    j["prefill"].push_back({{"n", p.n},
                            {"yoco_tokens_per_s", p.yoco_tokens_per_s},
                            {"transformer_tokens_per_s", p.transformer_tokens_per_s},
                            {"yoco_gflops", p.yoco_gflops}});
  }
  j["decode"] = nlohmann::json::array();
  for (const auto& d : decode) {
    j["decode"].push_back({{"batch", d.batch},
                           {"context", d.context},
                           {"rounds", d.rounds},
                           {"membw_gbs", d.membw_gbs},
                           {"sgemm_gflops", d.sgemm_gflops},
                           {"yoco_tokens_per_s", d.yoco_tokens_per_s},
                           {"transformer_tokens_per_s", d.transformer_tokens_per_s},
                           {"floor_tokens_per_s", d.floor_tokens_per_s},
                           {"bound_tokens_per_s", d.bound_tokens_per_s},
                           {"yoco_over_transformer", d.yoco_over_transformer.median},
                           {"yoco_over_transformer_min", d.yoco_over_transformer.min},
                           {"yoco_over_transformer_max", d.yoco_over_transformer.max},
                           {"bound_fraction", d.bound_fraction.median},
                           {"bound_fraction_min", d.bound_fraction.min},
                           {"bound_fraction_max", d.bound_fraction.max},
                           {"transformer_bound_tokens_per_s", d.transformer_bound_tokens_per_s},
                           {"transformer_bound_fraction", d.transformer_bound_fraction.median},
                           {"yoco_over_transformer_at_bounds", d.yoco_over_transformer_at_bounds},
                           {"batch_invariance_cost", d.batch_invariance_cost.median},
                           {"batch_invariance_cost_min", d.batch_invariance_cost.min},
                           {"batch_invariance_cost_max", d.batch_invariance_cost.max},
                           {"step_ms",
                            {{"projections", d.projection_ms},
                             {"ffn", d.ffn_ms},
                             {"retention", d.retention_ms},
                             {"attention", d.attention_ms},
                             {"total", d.step_ms},
                             {"products_bound", d.products_bound_ms},
                             {"attention_bound", d.attention_bound_ms}}}});
  }
  j["cache_bytes"] = nlohmann::json::array();
  for (const auto& c : cache_bytes) {
    j["cache_bytes"].push_back({{"n", c.n}, {"yoco", c.yoco}, {"transformer", c.transformer}});
  }
  return j.dump(2) + "\n";
}

std::string EngineBenchReport::ToTable() const {
  std::string out = absl::StrFormat(
      "machine: sgemm %.1f GFLOP/s, read bandwidth %.1f GB/s, %d threads, %s weights, %s K/V\n\n",
      sgemm_gflops, membw_gbs, threads, weights, kv_dtype);
  absl::StrAppend(&out,
                  "prefill      n   YOCO tok/s   Transformer tok/s   YOCO/Transformer   YOCO "
                  "GFLOP/s  (% of sgemm)\n");
  for (const auto& p : prefill) {
    absl::StrAppend(
        &out, absl::StrFormat("        %7d   %10.1f   %17.1f   %15.2fx   %12.1f  (%.0f%%)\n", p.n,
                              p.yoco_tokens_per_s, p.transformer_tokens_per_s,
                              p.yoco_tokens_per_s / p.transformer_tokens_per_s, p.yoco_gflops,
                              100.0 * p.yoco_gflops / sgemm_gflops));
  }
  absl::StrAppend(
      &out,
      "\ndecode   batch  context   YOCO tok/s   Transformer tok/s   YOCO/Transformer (range)   "
      "at bounds   floor tok/s   bound tok/s   YOCO/bound (range)   Transformer/bound   "
      "invariance cost (range)   rounds\n");
  for (const auto& d : decode) {
    const std::string speedup =
        absl::StrFormat("%.2fx (%.2f-%.2f)", d.yoco_over_transformer.median,
                        d.yoco_over_transformer.min, d.yoco_over_transformer.max);
    const std::string fraction =
        absl::StrFormat("%.0f%% (%.0f-%.0f)", 100 * d.bound_fraction.median,
                        100 * d.bound_fraction.min, 100 * d.bound_fraction.max);
    const std::string invariance =
        absl::StrFormat("%.2fx (%.2f-%.2f)", d.batch_invariance_cost.median,
                        d.batch_invariance_cost.min, d.batch_invariance_cost.max);
    absl::StrAppend(
        &out, absl::StrFormat("        %6d  %7d   %10.1f   %17.1f   %24s   %8.2fx   %11.1f   "
                              "%11.1f   %18s   %16.0f%%   %23s   %6d\n",
                              d.batch, d.context, d.yoco_tokens_per_s, d.transformer_tokens_per_s,
                              speedup, d.yoco_over_transformer_at_bounds, d.floor_tokens_per_s,
                              d.bound_tokens_per_s, fraction,
                              100 * d.transformer_bound_fraction.median, invariance, d.rounds));
  }
  absl::StrAppend(&out,
                  "\nYOCO decode step, ms   batch  projections     ffn  retention  attention   "
                  "other   total   products bound  attention bound\n");
  for (const auto& d : decode) {
    const double other = d.step_ms - d.projection_ms - d.ffn_ms - d.retention_ms - d.attention_ms;
    absl::StrAppend(
        &out, absl::StrFormat("                     %7d  %11.2f  %6.2f  %9.2f  %9.2f  "
                              "%6.2f  %6.2f   %14.2f  %15.2f\n",
                              d.batch, d.projection_ms, d.ffn_ms, d.retention_ms, d.attention_ms,
                              other, d.step_ms, d.products_bound_ms, d.attention_bound_ms));
  }
  absl::StrAppend(&out, "\ncache bytes  n   YOCO            Transformer     Transformer/YOCO\n");
  for (const auto& c : cache_bytes) {
    absl::StrAppend(
        &out, absl::StrFormat("        %7d   %13d   %13d   %.2fx\n", c.n, c.yoco, c.transformer,
                              static_cast<double>(c.transformer) / c.yoco));
  }
  return out;
}

}  // namespace yoco
