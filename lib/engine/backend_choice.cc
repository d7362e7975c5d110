// Backend construction for the binaries' --backend/--device flags.
#include "lib/engine/backend_choice.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/gemm.h"
#include "lib/engine/cpu_backend.h"
#ifdef YOCO_HAVE_CUDA
#include "lib/engine/cuda_backend.h"
#endif

namespace yoco {

absl::StatusOr<BackendKind> ParseBackendKind(const std::string& name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("--backend must be cpu or cuda, got '", name, "'"));
}

const char* BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

bool CudaBuilt() {
#ifdef YOCO_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(std::shared_ptr<const Model> model,
                                                     const BackendChoice& choice) {
  if (choice.kind == BackendKind::kCpu) {
    return std::make_unique<CpuBackend>(
        std::move(model),
        CpuBackendOptions{.threads = choice.threads, .batch_invariant = choice.batch_invariant});
  }
#ifdef YOCO_HAVE_CUDA
  CudaBackendOptions options;
  options.device = choice.device;
  options.lazy_host_states = choice.lazy_host_states;
  auto backend = CudaBackend::Create(std::move(model), options);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(*backend));
#else
  return absl::UnavailableError(
      "--backend cuda: this build has no CUDA backend (configure with nvcc on PATH)");
#endif
}

std::string DescribeBackend(const Backend& backend) {
#ifdef YOCO_HAVE_CUDA
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(&backend)) {
    return absl::StrCat("cuda: ", cuda->device_name());
  }
#endif
  return absl::StrCat("cpu (", cpu::KernelThreads(), " threads)");
}

}  // namespace yoco
