// DeviceBuffer and PinnedBuffer: one CUDA allocation (device memory, or page-locked host memory)
// freed on destruction; grown on demand by the CUDA backend's scratch, staging and sequence copies.
#ifndef YOCO_LIB_ENGINE_DEVICE_BUFFER_H_
#define YOCO_LIB_ENGINE_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace yoco {

// OK, or INTERNAL (RESOURCE_EXHAUSTED for out-of-memory) naming what failed.
inline absl::Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// One CUDA allocation of `Memory` (DeviceMemory or PinnedMemory below), freed on destruction.
template <typename Memory>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { Free(); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Makes the buffer at least `bytes` large. Contents are lost when it grows.
  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    Free();
    if (absl::Status s = CudaStatus(Memory::Allocate(&data_, bytes), Memory::kName); !s.ok()) {
      data_ = nullptr;
      return s;
    }
    bytes_ = bytes;
    return absl::OkStatus();
  }

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Free() {
    if (data_ != nullptr) Memory::Release(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceMemory {
  static constexpr const char* kName = "cudaMalloc";
  static cudaError_t Allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void Release(void* p) { cudaFree(p); }
};

// Page-locked host memory: device-to-host copies into it run at the bus's full rate instead of
// through the driver's bounce buffers.
struct PinnedMemory {
  static constexpr const char* kName = "cudaMallocHost";
  static cudaError_t Allocate(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void Release(void* p) { cudaFreeHost(p); }
};

using DeviceBuffer = CudaBuffer<DeviceMemory>;
using PinnedBuffer = CudaBuffer<PinnedMemory>;

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_DEVICE_BUFFER_H_
