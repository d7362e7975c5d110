// GPU benchmark. Weights are random and made on the device; states for the decode cells are
// one prefilled state copied per batch member. Decode runs with lazy_host_states (the GPU
// decode worker's setting: only new K/V rows and logits cross the bus each step).
#include "tools/bench/cuda_engine_bench.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/bf16_gemv.h"
#include "kernels/cuda/elementwise.h"
#include "lib/engine/cublas_library.h"
#include "lib/engine/cuda_backend.h"
#include "lib/status/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/bench/engine_bench.h"

namespace yoco {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median of `reps` event-timed runs of `body` after 3 warm-ups, in seconds.
template <typename Body>
absl::StatusOr<double> TimeOnDevice(int reps, Body body) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> times;
  for (int i = 0; i < reps + 3; ++i) {
    cudaEventRecord(start);
    RETURN_IF_ERROR(body());
    cudaEventRecord(stop);
    RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(stop), "timing"));
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

absl::Status MeasureCeilings(CudaEngineBenchReport* report) {
  const int n = 8192;
  DeviceBuffer a, b, c;
  RETURN_IF_ERROR(a.Reserve(int64_t{n} * n * 2));
  RETURN_IF_ERROR(b.Reserve(int64_t{n} * n * 2));
  RETURN_IF_ERROR(c.Reserve(int64_t{n} * n * 4));
  RETURN_IF_ERROR(
      CudaStatus(cuda::FillNormal(a.get(), true, int64_t{n} * n, 1, 1.0f, nullptr), "fill"));
  RETURN_IF_ERROR(
      CudaStatus(cuda::FillNormal(b.get(), true, int64_t{n} * n, 2, 1.0f, nullptr), "fill"));
  ASSIGN_OR_RETURN(const CublasLibrary* cublas, CublasLibrary::Get());
  cublasHandle_t blas;
  if (cublas->create(&blas) != CUBLAS_STATUS_SUCCESS) return absl::InternalError("cublasCreate");
  const float one = 1.0f, zero = 0.0f;
  auto gemm = TimeOnDevice(10, [&]() -> absl::Status {
    if (cublas->gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a.get(), CUDA_R_16BF, n,
                        b.get(), CUDA_R_16BF, n, &zero, c.get(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError("cublasGemmEx");
    }
    return absl::OkStatus();
  });
  cublas->destroy(blas);
  if (!gemm.ok()) return gemm.status();
  report->gemm_tflops = 2.0 * n * n * n / *gemm / 1e12;

  const size_t bytes = size_t{4} << 30;
  DeviceBuffer src, dst;
  RETURN_IF_ERROR(src.Reserve(bytes));
  RETURN_IF_ERROR(dst.Reserve(bytes));
  RETURN_IF_ERROR(CudaStatus(cudaMemset(src.get(), 1, bytes), "memset"));
  ASSIGN_OR_RETURN(double copy, TimeOnDevice(10, [&] {
                     return CudaStatus(cudaMemcpyAsync(dst.get(), src.get(), bytes,
                                                       cudaMemcpyDeviceToDevice, nullptr),
                                       "copy");
                   }));
  report->copy_gbs = 2.0 * bytes / copy / 1e9;
  return absl::OkStatus();
}

// The GEMV alone on a decode step's shapes, one activation row. Each call reads another copy
// of the weights from a 1 GiB pool, so none of them comes from the GPU's L2; calls are timed 16
// back to back, as a step's graph replays them, so one call's launch latency (a few µs, as long
// as the smallest product) is not counted against it.
absl::Status MeasureProducts(const ModelConfig& c, CudaEngineBenchReport* report) {
  const int64_t pool_values = int64_t{512} << 20;  // bf16: 1 GiB
  DeviceBuffer pool, x, y;
  RETURN_IF_ERROR(pool.Reserve(pool_values * 2));
  RETURN_IF_ERROR(
      CudaStatus(cuda::FillNormal(pool.get(), true, pool_values, 3, 0.02f, nullptr), "fill"));
  const int64_t D = c.dim, F = c.hidden_dim, widest = std::max(D, F);
  RETURN_IF_ERROR(x.Reserve(widest * sizeof(float)));
  RETURN_IF_ERROR(CudaStatus(cuda::FillNormal(x.get(), false, widest, 4, 1.0f, nullptr), "fill"));
  struct Shape {
    std::string what;
    std::vector<int64_t> rows;  // one matrix each, fused into one launch
    int64_t cols;
  };
  const std::vector<Shape> shapes = {
      {absl::StrCat("q alone (", D, "x", D, ")"), {D}, D},
      {"q/k/v/g/decay gate fused", {D, D, D, D, c.n_self_heads}, D},
      {"fc1/gate fused", {F, F}, D},
      {absl::StrCat("fc2 (", D, "x", F, ")"), {D}, F},
  };
  for (const Shape& shape : shapes) {
    int64_t values = 0, out_rows = 0;
    for (int64_t r : shape.rows) {
      values += r * shape.cols;
      out_rows += r;
    }
    const int64_t copies = pool_values / values;
    if (copies < 2) continue;  // a shape too large to rotate through the pool
    RETURN_IF_ERROR(y.Reserve(out_rows * sizeof(float)));
    constexpr int kCallsTimedTogether = 16;
    int64_t call = 0;
    std::vector<cuda::Bf16GemvOutput> outputs(shape.rows.size());
    ASSIGN_OR_RETURN(const double batch_seconds, TimeOnDevice(10, [&]() -> absl::Status {
                       for (int k = 0; k < kCallsTimedTogether; ++k) {
                         const auto* base = pool.get<__nv_bfloat16>() + (call++ % copies) * values;
                         int64_t offset = 0, row = 0;
                         for (size_t i = 0; i < shape.rows.size(); ++i) {
                           outputs[i] = {base + offset, shape.rows[i], y.get<float>() + row};
                           offset += shape.rows[i] * shape.cols;
                           row += shape.rows[i];
                         }
                         RETURN_IF_ERROR(CudaStatus(
                             cuda::Bf16GemvFused(outputs.data(), static_cast<int>(outputs.size()),
                                                 shape.cols, x.get<float>(), 1, false, nullptr),
                             "gemv"));
                       }
                       return absl::OkStatus();
                     }));
    const double seconds = batch_seconds / kCallsTimedTogether;
    const int64_t bytes = values * 2;
    report->products.push_back({shape.what, bytes, seconds * 1e6, bytes / seconds / 1e9});
  }
  return absl::OkStatus();
}

// Runs n tokens through `state` in chunks; logits for the last one.
absl::Status Prefill(CudaBackend& backend, SequenceState* state, int64_t n, int64_t chunk) {
  std::vector<int32_t> tokens(std::min(n, chunk));
  std::vector<float> logits;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(chunk, n - done);
    for (int64_t i = 0; i < m; ++i) tokens[i] = static_cast<int32_t>((done + i) * 7919 % 50000 + 4);
    ForwardSegment seg{state, absl::MakeConstSpan(tokens).subspan(0, m),
                       done + m == n ? LogitsMode::kLast : LogitsMode::kNone};
    RETURN_IF_ERROR(backend.Forward({&seg, 1}, &logits));
    done += m;
  }
  return absl::OkStatus();
}

}  // namespace

ModelConfig Yoco3bConfig() {
  ModelConfig c;
  c.dim = 3072;
  c.n_layers = 26;
  c.hidden_dim = 8192;
  c.n_self_heads = 24;
  c.n_attn_heads = 24;
  c.n_attn_kv_heads = 8;
  c.vocab_size = 100288;
  return c;
}

absl::StatusOr<CudaEngineBenchReport> RunCudaEngineBench(const CudaEngineBenchOptions& o,
                                                         std::ostream& log) {
  const ModelConfig& config = o.config;
  RETURN_IF_ERROR(config.Validate());
  CudaEngineBenchReport report;
  ASSIGN_OR_RETURN(std::vector<std::string> devices, CudaDevices());
  for (const std::string& d : devices) log << "CUDA device " << d << std::endl;
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(o.device), "cudaSetDevice"));
  log << "measuring the bf16 GEMM rate and copy bandwidth..." << std::endl;
  RETURN_IF_ERROR(MeasureCeilings(&report));
  log << absl::StrFormat("  %.0f TFLOP/s, %.0f GB/s", report.gemm_tflops, report.copy_gbs)
      << std::endl;
  log << "measuring the decode step's products alone..." << std::endl;
  RETURN_IF_ERROR(MeasureProducts(config, &report));

  CudaBackendOptions prefill_options;
  prefill_options.device = o.device;
  ASSIGN_OR_RETURN(auto prefill_backend,
                   CudaBackend::CreateRandom(config, /*bf16=*/true, 1, prefill_options));
  report.device = prefill_backend->device_name();
  report.weight_bytes = prefill_backend->weight_bytes();
  {  // warm-up: cuBLAS heuristics, kernel loads
    SequenceState s = SequenceState::Create(config);
    RETURN_IF_ERROR(Prefill(*prefill_backend, &s, 2048, o.prefill_chunk));
  }
  for (int64_t n : o.prefill_lengths) {
    SequenceState s = SequenceState::Create(config);
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(Prefill(*prefill_backend, &s, n, o.prefill_chunk));
    const double t = Seconds(t0);
    report.prefill.push_back({n, t, YocoPrefillFlops(config, n) / t / 1e12});
    log << absl::StrFormat("prefill n=%d: %.3f s", n, t) << std::endl;
  }
  prefill_backend.reset();

  CudaBackendOptions decode_options;
  decode_options.device = o.device;
  decode_options.lazy_host_states = true;
  ASSIGN_OR_RETURN(auto decoder, CudaBackend::CreateRandom(config, true, 1, decode_options));
  const int64_t kv_row_bytes = int64_t{config.kv_dim()} * 4 * 2;
  const int64_t self_bytes = config.self_state_floats() * 4 * config.n_self_layers();
  for (int64_t context : o.decode_contexts) {
    SequenceState seed = SequenceState::Create(config);
    bool seeded = false;
    for (int batch : o.decode_batches) {
      CudaEngineBenchReport::Decode cell{batch, context, 0, 0, ""};
      // Each step reads every layer's state once and writes it, and each cross layer reads
      // the shared K/V.
      const double step_bytes =
          report.weight_bytes +
          batch * (2.0 * self_bytes +
                   static_cast<double>(config.n_cross_layers()) * context * kv_row_bytes);
      cell.floor_tokens_per_s = batch / (step_bytes / (report.copy_gbs * 1e9));
      const int64_t state_bytes = batch * (context * kv_row_bytes + self_bytes);
      if (2 * state_bytes > o.decode_state_budget_bytes) {
        cell.skipped =
            absl::StrFormat("states of %.0f GiB exceed the budget", 2.0 * state_bytes / (1 << 30));
        report.decode.push_back(cell);
        continue;
      }
      if (!seeded) {
        RETURN_IF_ERROR(Prefill(*decoder, &seed, context, o.prefill_chunk));
        RETURN_IF_ERROR(decoder->SyncState(&seed));
        seeded = true;
      }
      std::vector<SequenceState> states(batch, seed);
      std::vector<int32_t> tokens(batch, 5);
      std::vector<ForwardSegment> segments;
      for (int b = 0; b < batch; ++b)
        segments.push_back({&states[b], {&tokens[b], 1}, LogitsMode::kLast});
      std::vector<float> logits;
      for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(decoder->Forward(segments, &logits));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.decode_steps; ++i) RETURN_IF_ERROR(decoder->Forward(segments, &logits));
      cell.tokens_per_s = batch * o.decode_steps / Seconds(t0);
      if (!decoder->graph_error().empty())
        log << "decode graphs off: " << decoder->graph_error() << std::endl;
      log << absl::StrFormat("decode batch=%d context=%d: %.1f tok/s (floor %.1f)", batch, context,
                             cell.tokens_per_s, cell.floor_tokens_per_s)
          << std::endl;
      report.decode.push_back(cell);
    }
  }
  decoder.reset();

  // Where the time goes: one prefill chunk and decode steps at the first context, profiled.
  CudaBackendOptions profiled = decode_options;
  profiled.profile = true;
  ASSIGN_OR_RETURN(auto probe, CudaBackend::CreateRandom(config, true, 1, profiled));
  auto record = [&](const std::string& what) {
    const CudaProfile& p = probe->profile();
    const double n = std::max(1, p.calls);
    report.breakdown.push_back({what, p.linear_ms / n, p.retention_ms / n, p.attention_ms / n,
                                p.other_gpu_ms / n, p.host_ms / n, p.total_ms / n});
    probe->ResetProfile();
  };
  SequenceState s = SequenceState::Create(config);
  RETURN_IF_ERROR(Prefill(*probe, &s, o.prefill_chunk, o.prefill_chunk));
  probe->ResetProfile();
  RETURN_IF_ERROR(Prefill(*probe, &s, o.prefill_chunk, o.prefill_chunk));
  record(absl::StrCat("prefill chunk of ", o.prefill_chunk, " at ", o.prefill_chunk));
  for (int batch : {1, 16}) {
    std::vector<SequenceState> states(batch, s);
    std::vector<int32_t> tokens(batch, 5);
    std::vector<ForwardSegment> segments;
    for (int b = 0; b < batch; ++b)
      segments.push_back({&states[b], {&tokens[b], 1}, LogitsMode::kLast});
    std::vector<float> logits;
    RETURN_IF_ERROR(probe->Forward(segments, &logits));
    probe->ResetProfile();
    for (int i = 0; i < 8; ++i) RETURN_IF_ERROR(probe->Forward(segments, &logits));
    record(absl::StrCat("decode step, batch ", batch, " at ", s.position));
  }
  return report;
}

std::string CudaEngineBenchReport::ToJson() const {
  nlohmann::json j;
  j["device"] = device;
  j["gemm_bf16_tflops"] = gemm_tflops;
  j["copy_gbs"] = copy_gbs;
  j["weight_bytes"] = weight_bytes;
  for (const auto& p : products) {
    j["products"].push_back({{"what", p.what}, {"bytes", p.bytes}, {"us", p.us}, {"gbs", p.gbs}});
  }
  for (const auto& p : prefill)
    j["prefill"].push_back({{"n", p.n}, {"seconds", p.seconds}, {"tflops", p.tflops}});
  for (const auto& d : decode) {
    j["decode"].push_back({{"batch", d.batch},
                           {"context", d.context},
                           {"tokens_per_s", d.tokens_per_s},
                           {"floor_tokens_per_s", d.floor_tokens_per_s},
                           {"skipped", d.skipped}});
  }
  for (const auto& b : breakdown) {
    j["breakdown"].push_back({{"what", b.what},
                              {"linear_ms", b.linear_ms},
                              {"retention_ms", b.retention_ms},
                              {"attention_ms", b.attention_ms},
                              {"other_gpu_ms", b.other_gpu_ms},
                              {"host_ms", b.host_ms},
                              {"total_ms", b.total_ms}});
  }
  return j.dump(2) + "\n";
}

std::string CudaEngineBenchReport::ToTable() const {
  std::string out =
      absl::StrFormat("device: %s; bf16 GEMM %.0f TFLOP/s, copy %.0f GB/s; weights %.2f GB\n\n",
                      device, gemm_tflops, copy_gbs, weight_bytes / 1e9);
  if (!products.empty()) {
    absl::StrAppend(&out, "products alone, 1 row              MB       us     GB/s  (% of copy)\n");
    for (const auto& p : products) {
      absl::StrAppend(&out, absl::StrFormat("  %-30s %7.1f  %7.1f  %7.0f  (%.0f%%)\n", p.what,
                                            p.bytes / 1e6, p.us, p.gbs, 100.0 * p.gbs / copy_gbs));
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "prefill        n   seconds   tok/s        TFLOP/s  (% of GEMM)\n");
  for (const auto& p : prefill) {
    absl::StrAppend(
        &out, absl::StrFormat("        %7d   %7.3f   %10.0f   %7.1f  (%.0f%%)\n", p.n, p.seconds,
                              p.n / p.seconds, p.tflops, 100.0 * p.tflops / gemm_tflops));
  }
  absl::StrAppend(&out, "\ndecode   batch  context   tok/s      floor tok/s   floor/measured\n");
  for (const auto& d : decode) {
    if (!d.skipped.empty()) {
      absl::StrAppend(
          &out, absl::StrFormat("        %6d  %7d   skipped: %s\n", d.batch, d.context, d.skipped));
      continue;
    }
    absl::StrAppend(&out, absl::StrFormat("        %6d  %7d   %9.1f  %11.1f   %9.2fx\n", d.batch,
                                          d.context, d.tokens_per_s, d.floor_tokens_per_s,
                                          d.floor_tokens_per_s / d.tokens_per_s));
  }
  absl::StrAppend(&out,
                  "\nms per call                    linear  retention  attention  other GPU  "
                  "host    total\n");
  for (const auto& b : breakdown) {
    absl::StrAppend(&out, absl::StrFormat("%-30s %7.2f  %9.2f  %9.2f  %9.2f  %6.2f  %7.2f\n",
                                          b.what, b.linear_ms, b.retention_ms, b.attention_ms,
                                          b.other_gpu_ms, b.host_ms, b.total_ms));
  }
  return out;
}

}  // namespace yoco
