// Model loading.
#include "lib/engine/model.h"

#include <filesystem>

#include "lib/status/status_macros.h"

namespace yoco {

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& dir,
                                                         WeightFormat format, KvDtype kv_dtype) {
  const std::string params = (std::filesystem::path(dir) / "params.json").string();
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromFile(params));
  config.kv_dtype = kv_dtype;
  ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(dir));
  ASSIGN_OR_RETURN(auto weights,
                   ModelWeights::FromCheckpoint(config, std::move(checkpoint), format));
  return std::make_shared<const Model>(std::move(config), std::move(weights));
}

}  // namespace yoco
