// The JSON Schema compiler and the matcher it drives: any schema text gives a schema or a clear
// error, never a crash, a hang or a huge allocation. The input is a schema, then (after the
// first NUL) bytes to feed; a text the matcher takes whole must be JSON.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/grammar/json_matcher.h"
#include "lib/grammar/json_schema.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find('\0');
  absl::StatusOr<yoco::JsonSchema> schema = yoco::JsonSchema::Compile(input.substr(0, cut));
  if (!schema.ok()) {
    if (schema.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  if (cut == std::string::npos) return 0;
  yoco::JsonMatcher matcher(*schema);
  std::string taken;
  for (size_t i = cut + 1; i < input.size(); ++i) {
    if (matcher.Advance(input.substr(i, 1))) taken += input[i];
  }
  if (matcher.Complete() && !nlohmann::json::accept(taken)) __builtin_trap();
  return 0;
}
