// KvDtype names.
#include "lib/model/kv_dtype.h"

#include "absl/strings/str_cat.h"

namespace yoco {

std::string KvDtypeName(KvDtype dtype) { return dtype == KvDtype::kF32 ? "f32" : "bf16"; }

absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown K/V dtype \"", name, "\" (f32 or bf16)"));
}

}  // namespace yoco
