// Writing safetensors files: the header sorted by name and padded to 8 bytes, data in the
// same order (the layout the reference's tooling produces).
#ifndef YOCO_LIB_ENGINE_SAFETENSORS_WRITER_H_
#define YOCO_LIB_ENGINE_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/engine/dtype.h"

namespace yoco {

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian elements
};

// Encodes the whole file in memory (tests corrupt it byte by byte).
std::string EncodeSafetensors(std::vector<TensorToWrite> tensors);
absl::Status WriteSafetensors(const std::string& path, std::vector<TensorToWrite> tensors);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_SAFETENSORS_WRITER_H_
