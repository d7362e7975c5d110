// KvDtype: how the shared K/V is held (fp32 or bf16). Part of a model's identity (its
// fingerprint, bundle and snapshot headers), so it lives with ModelConfig rather than with the
// rows that store it.
#ifndef YOCO_LIB_MODEL_KV_DTYPE_H_
#define YOCO_LIB_MODEL_KV_DTYPE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

enum class KvDtype : uint32_t { kF32 = 0, kBF16 = 1 };  // values as stored in bundles

// "f32", "bf16" (flags and reports).
std::string KvDtypeName(KvDtype dtype);
absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name);
inline int64_t KvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_KV_DTYPE_H_
