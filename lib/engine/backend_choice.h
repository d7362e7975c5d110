// BackendChoice: which backend a process runs the model on (`--backend cpu|cuda`, `--device N`),
// and the one place that builds it, so every binary accepts the same flags and gives the same
// errors. The CUDA choice exists in every build; without CUDA it is an UNAVAILABLE error.
#ifndef YOCO_LIB_ENGINE_BACKEND_CHOICE_H_
#define YOCO_LIB_ENGINE_BACKEND_CHOICE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/engine/backend.h"

namespace yoco {

enum class BackendKind { kCpu, kCuda };

struct BackendChoice {
  BackendKind kind = BackendKind::kCpu;
  int threads = 0;  // CPU kernel threads; 0: one per core
  int device = 0;   // CUDA device index
  // CUDA: keep self-decoder states on the device between calls (decode workers, which never
  // export a state); SyncState copies them back.
  bool lazy_host_states = false;
  // CPU: decode steps give each sequence the bits it gets alone (CpuBackendOptions).
  bool batch_invariant = true;
};

// "cpu" or "cuda"; anything else is INVALID_ARGUMENT naming the flag.
absl::StatusOr<BackendKind> ParseBackendKind(const std::string& name);
const char* BackendKindName(BackendKind kind);

// True when this build includes the CUDA backend.
bool CudaBuilt();

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(std::shared_ptr<const Model> model,
                                                     const BackendChoice& choice);

// "cpu (2 threads)" or the CUDA device's name: what GetWorkerInfo and /metrics report.
std::string DescribeBackend(const Backend& backend);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_BACKEND_CHOICE_H_
