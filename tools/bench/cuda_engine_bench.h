// The GPU benchmark behind `yoco bench --backend cuda`: YOCO prefill and decode on the CUDA
// backend, against the GPU's own ceilings measured in the same run (a cuBLAS bf16 GEMM for the
// tensor-core rate, a device-to-device copy for memory bandwidth).
#ifndef YOCO_TOOLS_BENCH_CUDA_ENGINE_BENCH_H_
#define YOCO_TOOLS_BENCH_CUDA_ENGINE_BENCH_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/model_config.h"

namespace yoco {

struct CudaEngineBenchOptions {
  ModelConfig config;  // default: YOCO-3B (Yoco3bConfig)
  int device = 0;
  std::vector<int64_t> prefill_lengths = {32768, 131072, 524288};
  int64_t prefill_chunk = 32768;  // tokens per Forward call, as the reference's prefill
  std::vector<int> decode_batches = {1, 16, 64};
  std::vector<int64_t> decode_contexts = {4096, 131072};
  // Decode cells whose states would exceed this many bytes in all (host and device) are skipped.
  int64_t decode_state_budget_bytes = int64_t{40} << 30;
  int decode_steps = 16;
};

// dim 3072, 26 layers (13 gRet + 13 cross), 24 self heads, 24 attention heads over 8 KV heads,
// FFN 8192, vocab 100288: yoco_reference.md §6.
ModelConfig Yoco3bConfig();

struct CudaEngineBenchReport {
  std::string device;
  double gemm_tflops = 0;  // cuBLAS bf16, 8192³
  double copy_gbs = 0;     // device-to-device copy, bytes read + written per second
  int64_t weight_bytes = 0;
  struct Prefill {
    int64_t n = 0;
    double seconds = 0;
    double tflops = 0;  // YocoPrefillFlops / time
  };
  struct Decode {
    int batch = 0;
    int64_t context = 0;
    double tokens_per_s = 0;
    double floor_tokens_per_s = 0;  // batch / ((weights + batch · state bytes read) / copy_gbs)
    std::string skipped;            // why the cell did not run, if it did not
  };
  // A decode step's products alone at one activation row (the bf16 GEMV), against copy_gbs: what
  // the products of a step could reach if nothing else ran.
  struct Product {
    std::string what;
    int64_t bytes = 0;  // weights read
    double us = 0;      // per call
    double gbs = 0;     // bytes / time
  };
  std::vector<Product> products;
  std::vector<Prefill> prefill;
  std::vector<Decode> decode;
  // Where the time of one call goes (a separate, profiled run: CudaBackendOptions::profile).
  struct Breakdown {
    std::string what;
    double linear_ms = 0, retention_ms = 0, attention_ms = 0, other_gpu_ms = 0, host_ms = 0,
           total_ms = 0;  // per call
  };
  std::vector<Breakdown> breakdown;

  std::string ToJson() const;
  std::string ToTable() const;
};

absl::StatusOr<CudaEngineBenchReport> RunCudaEngineBench(const CudaEngineBenchOptions& options,
                                                         std::ostream& log);

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_CUDA_ENGINE_BENCH_H_
