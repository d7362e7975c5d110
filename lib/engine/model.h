// Model: a loaded checkpoint (config + weights), immutable and shareable between threads and
// backends.
#ifndef YOCO_LIB_ENGINE_MODEL_H_
#define YOCO_LIB_ENGINE_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/engine/model_weights.h"
#include "lib/model/model_config.h"

namespace yoco {

class Model {
 public:
  // Loads DIR/params.json and DIR/model.safetensors (or a sharded checkpoint). Every defect is
  // an error naming the file, tensor or field. `kv_dtype` becomes config().kv_dtype.
  static absl::StatusOr<std::shared_ptr<const Model>> Load(
      const std::string& dir, WeightFormat format = WeightFormat::kAsStored,
      KvDtype kv_dtype = KvDtype::kF32);

  Model(ModelConfig config, std::unique_ptr<ModelWeights> weights)
      : config_(std::move(config)), weights_(std::move(weights)) {}

  const ModelConfig& config() const { return config_; }
  // REQUIRES: has_weights(). Only benchmark models made on a device lack host weights.
  const ModelWeights& weights() const { return *weights_; }
  bool has_weights() const { return weights_ != nullptr; }
  uint64_t fingerprint() const { return weights_ ? weights_->fingerprint() : 0; }

 private:
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_MODEL_H_
