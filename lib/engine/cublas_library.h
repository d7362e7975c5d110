// CublasLibrary: the cuBLAS entry points the CUDA backend calls, loaded with dlopen when the
// first user asks for them. Linking cuBLAS instead would load cuBLASLt at program start, and
// its 94 KB of static thread-local storage leaves no room in the small stacks civetweb (the
// /metrics server) gives its threads: every service would fail to serve metrics, GPU or not.
// Libraries loaded later get their thread-local storage allocated on demand instead.
#ifndef YOCO_LIB_ENGINE_CUBLAS_LIBRARY_H_
#define YOCO_LIB_ENGINE_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace yoco {

struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // The 32-bit-size overload (C++ sees a 64-bit one too).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;

  // Loads libcublas.so.<major> once (from the loader's path, else beside the CUDA runtime this
  // program uses). UNAVAILABLE naming what was tried when it cannot be found.
  static absl::StatusOr<const CublasLibrary*> Get();
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_CUBLAS_LIBRARY_H_
