// dlopen of cuBLAS, once per process.
#include "lib/engine/cublas_library.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

// The folder of the CUDA runtime library this process loaded (the toolkit keeps cuBLAS there).
std::string RuntimeFolder() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

template <typename F>
bool Resolve(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

absl::StatusOr<const CublasLibrary*> CublasLibrary::Get() {
  static std::once_flag once;
  static CublasLibrary library;
  static absl::Status status;
  std::call_once(once, [] {
    const std::string name = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string tried = name;
    if (handle == nullptr) {
      const std::string beside = RuntimeFolder() + "/" + name;
      handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
      absl::StrAppend(&tried, ", ", beside);
    }
    if (handle == nullptr) {
      status = absl::UnavailableError(absl::StrCat("cannot load cuBLAS (tried ", tried, ")"));
      return;
    }
    if (!Resolve(handle, "cublasCreate_v2", &library.create) ||
        !Resolve(handle, "cublasDestroy_v2", &library.destroy) ||
        !Resolve(handle, "cublasSetStream_v2", &library.set_stream) ||
        !Resolve(handle, "cublasGemmEx", &library.gemm_ex) ||
        !Resolve(handle, "cublasGetStatusString", &library.status_string)) {
      status = absl::UnavailableError(absl::StrCat(name, " lacks an expected entry point"));
    }
  });
  if (!status.ok()) return status;
  return &library;
}

}  // namespace yoco
