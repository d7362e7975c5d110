// Reading safetensors checkpoints: one memory-mapped file (SafetensorsFile) or a sharded
// checkpoint described by model.safetensors.index.json (Checkpoint).
//
// Format: u64 little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {...}}, then the data,
// offsets relative to the end of the header.
#ifndef YOCO_LIB_ENGINE_SAFETENSORS_H_
#define YOCO_LIB_ENGINE_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/engine/dtype.h"

namespace yoco {

// A tensor inside a mapped file. `data` stays valid while its file is alive.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // not necessarily aligned
  int64_t num_elements() const;
};

// One read-only memory-mapped safetensors file. Movable, not copyable.
class SafetensorsFile {
 public:
  // Headers larger than this are refused rather than parsed (the format's own limit).
  static constexpr uint64_t kMaxHeaderBytes = 100 << 20;

  // Maps and validates the file: header size, JSON, every entry's dtype/shape/offsets. A defect
  // is an INVALID_ARGUMENT (DATA_LOSS for truncation) naming the file and the tensor.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// All tensors of a checkpoint folder: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` (its "weight_map": {tensor name: shard file}).
class Checkpoint {
 public:
  static absl::StatusOr<Checkpoint> Open(const std::string& dir);

  // Tensors by name; views into files this object owns.
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> tensors_;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_SAFETENSORS_H_
