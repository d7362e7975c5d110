// NumPy .npy files (format version 1.0, little-endian float32, C order): the `yoco logits`
// output and the golden test data.
#ifndef YOCO_LIB_ENGINE_NPY_H_
#define YOCO_LIB_ENGINE_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yoco {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      const float* data);
// Reads a '<f4' C-order array; anything else is INVALID_ARGUMENT.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_NPY_H_
