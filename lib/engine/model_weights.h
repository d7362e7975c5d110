// ModelWeights: every parameter of a YOCO model, bound by the reference's state-dict names
// and checked against the config's shapes, as fp32 matrices the kernels read directly.
#ifndef YOCO_LIB_ENGINE_MODEL_WEIGHTS_H_
#define YOCO_LIB_ENGINE_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/linear.h"
#include "lib/engine/ffn_block.h"
#include "lib/engine/huge_page_buffer.h"
#include "lib/engine/safetensors.h"
#include "lib/model/model_config.h"

namespace yoco {

// A Linear layer's weight [out, in] (y = x Wᵀ), fp32, bf16 or q8.
using Matrix = cpu::WeightMatrix;

// How matrices are held in memory. Norm weights are always fp32.
enum class WeightFormat {
  kAsStored,  // F32 and BF16 used in place from the mapping; F16 widened to fp32
  kF32,       // everything widened to fp32
  kBF16,      // matrices rounded to bf16 (halves the bytes a decode step reads)
  kQ8,        // matrices as int8 blocks with a scale (kernels/cpu/q8_weights.h) where their
              // columns fill whole blocks, bf16 otherwise; the embedding (read a row per token)
              // in bf16
};

// "as-stored", "f32", "bf16", "q8" (flags and reports).
std::string WeightFormatName(WeightFormat format);
absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name);

struct SelfLayerWeights {
  const float* mixer_norm = nullptr;  // [D]
  Matrix q, k, v;                     // [D, D]
  Matrix g;                           // [D, D], gRet only (output gate)
  Matrix gt;                          // [Hs, D], gRet only (decay logits)
  Matrix out;                         // [D, D]
  const float* ffn_norm = nullptr;    // [D]
  FfnWeights ffn;
};

struct CrossLayerWeights {
  const float* mixer_norm = nullptr;  // [D]
  Matrix q;                           // [D, D]
  Matrix out;                         // [D, D]
  const float* ffn_norm = nullptr;    // [D]
  FfnWeights ffn;
};

class ModelWeights {
 public:
  // Binds every tensor the config calls for. Missing, unexpected and mis-shaped tensors are
  // INVALID_ARGUMENT errors naming the tensor. Tensors used in place keep the mapping alive
  // with this object; others are converted once.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> FromCheckpoint(
      const ModelConfig& config, Checkpoint checkpoint,
      WeightFormat format = WeightFormat::kAsStored);

  // The reference's state-dict names with their [shape], in registration order.
  static std::vector<std::pair<std::string, std::vector<int64_t>>> ExpectedTensors(
      const ModelConfig& config);

  Matrix embed;   // [V, D], rows read one token at a time
  Matrix output;  // [V, D]
  std::vector<SelfLayerWeights> self_layers;
  const float* kv_norm = nullptr;  // [D]
  Matrix kv_k;                     // [Hkv*da, D]
  Matrix kv_v;                     // [Hkv*da, D]
  std::vector<CrossLayerWeights> cross_layers;
  const float* final_norm = nullptr;  // [D]

  // 64-bit identity of config + every tensor's name, dtype, shape and bytes; bundles and
  // snapshots carry it so state from another model is refused.
  uint64_t fingerprint() const { return fingerprint_; }

  // Bytes of all matrices as held in memory, and their elements.
  int64_t matrix_bytes() const;
  int64_t matrix_params() const;
  // Every matrix, the embedding first.
  std::vector<const Matrix*> matrices() const;

 private:
  ModelWeights() = default;

  Checkpoint checkpoint_;
  std::vector<HugePageBuffer> converted_;  // tensors not used in place
  uint64_t fingerprint_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_MODEL_WEIGHTS_H_
