// ParseStrictJson: JSON from files we did not write (params.json, safetensors headers, shard
// indexes). Before any DOM is built, a streaming pass refuses nesting deeper than a limit (a
// 100 MiB nest of arrays would otherwise cost gigabytes), too many values, and duplicate keys
// (which nlohmann resolves silently, so two readers could see two different files).
#ifndef YOCO_LIB_MODEL_STRICT_JSON_H_
#define YOCO_LIB_MODEL_STRICT_JSON_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace yoco {

struct JsonLimits {
  int max_depth = 16;                   // objects and arrays inside each other
  size_t max_values = size_t{1} << 22;  // every value and key counts one
};

// INVALID_ARGUMENT naming the problem (and the offending key) when the text is not JSON or
// breaks a limit.
absl::StatusOr<nlohmann::json> ParseStrictJson(absl::string_view text, const JsonLimits& limits);

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_STRICT_JSON_H_
