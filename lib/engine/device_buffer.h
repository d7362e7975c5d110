// DeviceBuffer: one cudaMalloc'd allocation, freed on destruction; grown on demand by the CUDA
// backend's scratch and sequence copies.
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

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Free(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
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
    if (absl::Status s = CudaStatus(cudaMalloc(&data_, bytes), "cudaMalloc"); !s.ok()) {
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
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost): device-to-host copies into it run at the bus's full
// rate instead of through the driver's bounce buffers.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Free(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Makes the buffer at least `bytes` large. Contents are lost when it grows.
  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    Free();
    if (absl::Status s = CudaStatus(cudaMallocHost(&data_, bytes), "cudaMallocHost"); !s.ok()) {
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

 private:
  void Free() {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_DEVICE_BUFFER_H_
