// Random models for tests, benchmarks and the demo: every weight ~ N(0, std²), every norm
// weight 1, written as a checkpoint folder the loader reads like any other.
#ifndef YOCO_LIB_ENGINE_RANDOM_MODEL_H_
#define YOCO_LIB_ENGINE_RANDOM_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "lib/engine/dtype.h"
#include "lib/model/model_config.h"

namespace yoco {

struct RandomModelOptions {
  uint64_t seed = 0;
  DType dtype = DType::kF32;  // F32 or BF16 (F16 also works)
  double weight_std = 0.02;
  bool random_norms = false;  // norm weights 1 + 0.1·N(0,1) instead of 1 (exercises them in tests)
};

// Writes DIR/params.json and DIR/model.safetensors, creating DIR.
absl::Status WriteRandomModel(const ModelConfig& config, const RandomModelOptions& options,
                              const std::string& dir);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_RANDOM_MODEL_H_
