// Upload of a model's weights, and the cuBLAS call behind every linear layer. Row-major [out, in]
// weights are column-major [in, out] to cuBLAS, so y = x Wᵀ is the column-major product
// yᵀ[out, m] = op_T(W)[out, in] · xᵀ[in, m].
#include "lib/engine/cuda_weights.h"

#include <cstring>

#include "kernels/cuda/bf16_gemv.h"
#include "kernels/cuda/elementwise.h"
#include "lib/engine/cublas_library.h"
#include "lib/engine/dtype.h"
#include "lib/status/status_macros.h"

namespace yoco {
namespace {

absl::Status UploadBytes(const void* src, size_t bytes, DeviceBuffer* dst, int64_t* total) {
  if (absl::Status s = dst->Reserve(bytes); !s.ok()) return s;
  *total += static_cast<int64_t>(bytes);
  return CudaStatus(cudaMemcpy(dst->get(), src, bytes, cudaMemcpyHostToDevice), "weight upload");
}

absl::Status UploadNorm(const float* w, int64_t n, DeviceBuffer* dst, int64_t* total) {
  return UploadBytes(w, n * sizeof(float), dst, total);
}

absl::Status UploadMatrix(const Matrix& m, DeviceMatrix* dst, int64_t* total) {
  if (m.type == cpu::WeightType::kQ8) {
    return absl::UnimplementedError("q8 weights run on the CPU backend only (--weights bf16)");
  }
  dst->rows = m.rows;
  dst->cols = m.cols;
  dst->bf16 = m.type == cpu::WeightType::kBF16;
  if (!m.packed) return UploadBytes(m.data, m.bytes(), &dst->data, total);
  // Packed for the CPU's decode: back to row-major bf16 (exact: the values are bf16).
  std::vector<uint16_t> rows(m.rows * m.cols);
#pragma omp parallel
  {
    std::vector<float> row(m.cols);
#pragma omp for
    for (int64_t r = 0; r < m.rows; ++r) {
      m.RowToFloat(r, row.data());
      for (int64_t c = 0; c < m.cols; ++c) rows[r * m.cols + c] = FloatToBf16(row[c]);
    }
  }
  return UploadBytes(rows.data(), rows.size() * sizeof(uint16_t), &dst->data, total);
}

absl::Status UploadFfn(const FfnWeights& f, DeviceFfn* d, int64_t* total) {
  if (absl::Status s = UploadMatrix(f.fc1, &d->fc1, total); !s.ok()) return s;
  if (absl::Status s = UploadMatrix(f.gate, &d->gate, total); !s.ok()) return s;
  return UploadMatrix(f.fc2, &d->fc2, total);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaWeights>> CudaWeights::Upload(const ModelConfig& config,
                                                                 const ModelWeights& weights) {
  auto w = std::make_unique<CudaWeights>();
  int64_t* total = &w->bytes;
  const int64_t D = config.dim;
  const bool gret = config.self_attention() == SelfAttentionKind::kGatedRetention;
  RETURN_IF_ERROR(UploadMatrix(weights.embed, &w->embed, total));
  RETURN_IF_ERROR(UploadMatrix(weights.output, &w->output, total));
  w->self_layers.resize(weights.self_layers.size());
  for (size_t l = 0; l < weights.self_layers.size(); ++l) {
    const SelfLayerWeights& src = weights.self_layers[l];
    DeviceSelfLayer& dst = w->self_layers[l];
    RETURN_IF_ERROR(UploadNorm(src.mixer_norm, D, &dst.mixer_norm, total));
    RETURN_IF_ERROR(UploadMatrix(src.q, &dst.q, total));
    RETURN_IF_ERROR(UploadMatrix(src.k, &dst.k, total));
    RETURN_IF_ERROR(UploadMatrix(src.v, &dst.v, total));
    if (gret) RETURN_IF_ERROR(UploadMatrix(src.g, &dst.g, total));
    if (gret) RETURN_IF_ERROR(UploadMatrix(src.gt, &dst.gt, total));
    RETURN_IF_ERROR(UploadMatrix(src.out, &dst.out, total));
    RETURN_IF_ERROR(UploadNorm(src.ffn_norm, D, &dst.ffn_norm, total));
    RETURN_IF_ERROR(UploadFfn(src.ffn, &dst.ffn, total));
  }
  RETURN_IF_ERROR(UploadNorm(weights.kv_norm, D, &w->kv_norm, total));
  RETURN_IF_ERROR(UploadMatrix(weights.kv_k, &w->kv_k, total));
  RETURN_IF_ERROR(UploadMatrix(weights.kv_v, &w->kv_v, total));
  w->cross_layers.resize(weights.cross_layers.size());
  for (size_t l = 0; l < weights.cross_layers.size(); ++l) {
    const CrossLayerWeights& src = weights.cross_layers[l];
    DeviceCrossLayer& dst = w->cross_layers[l];
    RETURN_IF_ERROR(UploadNorm(src.mixer_norm, D, &dst.mixer_norm, total));
    RETURN_IF_ERROR(UploadMatrix(src.q, &dst.q, total));
    RETURN_IF_ERROR(UploadMatrix(src.out, &dst.out, total));
    RETURN_IF_ERROR(UploadNorm(src.ffn_norm, D, &dst.ffn_norm, total));
    RETURN_IF_ERROR(UploadFfn(src.ffn, &dst.ffn, total));
  }
  RETURN_IF_ERROR(UploadNorm(weights.final_norm, D, &w->final_norm, total));
  return w;
}

namespace {

struct RandomFiller {
  bool bf16;
  uint64_t seed;
  float std;
  int64_t* total;

  absl::Status Matrix(int64_t rows, int64_t cols, DeviceMatrix* m) {
    m->rows = rows;
    m->cols = cols;
    m->bf16 = bf16;
    const int64_t bytes = rows * cols * (bf16 ? 2 : 4);
    RETURN_IF_ERROR(m->data.Reserve(bytes));
    *total += bytes;
    return CudaStatus(cuda::FillNormal(m->data.get(), bf16, rows * cols, seed++, std, nullptr),
                      "random weights");
  }
  absl::Status Norm(int64_t n, DeviceBuffer* b) {
    RETURN_IF_ERROR(b->Reserve(n * sizeof(float)));
    *total += n * static_cast<int64_t>(sizeof(float));
    return CudaStatus(cuda::Fill(b->get<float>(), n, 1.0f, nullptr), "norm weights");
  }
  absl::Status Ffn(int64_t D, int64_t F, DeviceFfn* f) {
    RETURN_IF_ERROR(Matrix(F, D, &f->fc1));
    RETURN_IF_ERROR(Matrix(F, D, &f->gate));
    return Matrix(D, F, &f->fc2);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaWeights>> CudaWeights::Random(const ModelConfig& config,
                                                                 bool bf16, uint64_t seed,
                                                                 float std) {
  auto w = std::make_unique<CudaWeights>();
  RandomFiller fill{bf16, seed, std, &w->bytes};
  const int64_t D = config.dim, F = config.hidden_dim, V = config.vocab_size;
  const int64_t Hs = config.n_self_heads, KV = config.kv_dim();
  const bool gret = config.self_attention() == SelfAttentionKind::kGatedRetention;
  RETURN_IF_ERROR(fill.Matrix(V, D, &w->embed));
  RETURN_IF_ERROR(fill.Matrix(V, D, &w->output));
  w->self_layers.resize(config.n_self_layers());
  for (DeviceSelfLayer& l : w->self_layers) {
    RETURN_IF_ERROR(fill.Norm(D, &l.mixer_norm));
    for (DeviceMatrix* m : {&l.q, &l.k, &l.v, &l.out}) RETURN_IF_ERROR(fill.Matrix(D, D, m));
    if (gret) {
      RETURN_IF_ERROR(fill.Matrix(D, D, &l.g));
      RETURN_IF_ERROR(fill.Matrix(Hs, D, &l.gt));
    }
    RETURN_IF_ERROR(fill.Norm(D, &l.ffn_norm));
    RETURN_IF_ERROR(fill.Ffn(D, F, &l.ffn));
  }
  RETURN_IF_ERROR(fill.Norm(D, &w->kv_norm));
  RETURN_IF_ERROR(fill.Matrix(KV, D, &w->kv_k));
  RETURN_IF_ERROR(fill.Matrix(KV, D, &w->kv_v));
  w->cross_layers.resize(config.n_cross_layers());
  for (DeviceCrossLayer& l : w->cross_layers) {
    RETURN_IF_ERROR(fill.Norm(D, &l.mixer_norm));
    RETURN_IF_ERROR(fill.Matrix(D, D, &l.q));
    RETURN_IF_ERROR(fill.Matrix(D, D, &l.out));
    RETURN_IF_ERROR(fill.Norm(D, &l.ffn_norm));
    RETURN_IF_ERROR(fill.Ffn(D, F, &l.ffn));
  }
  RETURN_IF_ERROR(fill.Norm(D, &w->final_norm));
  RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "random weights"));
  return w;
}

absl::Status DeviceLinear(cublasHandle_t blas, cudaStream_t stream, const float* x, int64_t m,
                          const DeviceMatrix& w, float* y, bool accumulate, DeviceBuffer* x_bf16) {
  if (m == 0) return absl::OkStatus();
  if (w.bf16 && cuda::Bf16GemvFits(m, w.cols)) {  // decode: fp32 activations, weights read once
    return CudaStatus(cuda::Bf16Gemv(w.data.get<__nv_bfloat16>(), w.rows, w.cols, x,
                                     static_cast<int>(m), y, accumulate, stream),
                      "bf16 gemv");
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const void* b = x;
  cudaDataType type = CUDA_R_32F;
  if (w.bf16) {
    if (absl::Status s = x_bf16->Reserve(m * w.cols * sizeof(__nv_bfloat16)); !s.ok()) return s;
    if (absl::Status s = CudaStatus(
            cuda::ToBf16(x, m * w.cols, x_bf16->get<__nv_bfloat16>(), stream), "bf16 cast");
        !s.ok()) {
      return s;
    }
    b = x_bf16->get();
    type = CUDA_R_16BF;
  }
  ASSIGN_OR_RETURN(const CublasLibrary* cublas, CublasLibrary::Get());
  const cublasStatus_t st = cublas->gemm_ex(
      blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(m),
      static_cast<int>(w.cols), &alpha, w.data.get(), type, static_cast<int>(w.cols), b, type,
      static_cast<int>(w.cols), &beta, y, CUDA_R_32F, static_cast<int>(w.rows), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGemmEx: ", cublas->status_string(st)));
  }
  return absl::OkStatus();
}

absl::Status DeviceLinearFused(cublasHandle_t blas, cudaStream_t stream, const float* x, int64_t m,
                               absl::Span<const DeviceLinearOutput> outputs, DeviceBuffer* x_bf16) {
  if (m == 0) return absl::OkStatus();
  // The matrices the GEMV takes (bf16, decode-sized m, the first such matrix's width) share one
  // launch; any other runs alone.
  cuda::Bf16GemvOutput gemvs[cuda::kMaxFusedGemvs];
  int fused = 0;
  int64_t cols = -1;
  for (const DeviceLinearOutput& out : outputs) {
    const bool gemv = out.w->bf16 && cuda::Bf16GemvFits(m, out.w->cols) &&
                      (cols < 0 || out.w->cols == cols) && fused < cuda::kMaxFusedGemvs;
    if (!gemv) {
      if (absl::Status s = DeviceLinear(blas, stream, x, m, *out.w, out.y, false, x_bf16); !s.ok())
        return s;
      continue;
    }
    cols = out.w->cols;
    gemvs[fused++] = {out.w->data.get<__nv_bfloat16>(), out.w->rows, out.y};
  }
  if (fused == 0) return absl::OkStatus();
  return CudaStatus(cuda::Bf16GemvFused(gemvs, fused, cols, x, static_cast<int>(m),
                                        /*accumulate=*/false, stream),
                    "fused bf16 gemv");
}

}  // namespace yoco
