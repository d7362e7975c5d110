// params.json: any bytes give a config or a clear error, never a crash, a hang or a huge
// allocation; a config that parses survives a write and re-read unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = yoco::ModelConfig::FromJson(text);
  if (config.ok()) {
    auto again = yoco::ModelConfig::FromJson(config->ToJson());
    if (!again.ok() || again->ToJson() != config->ToJson()) __builtin_trap();
  }
  return 0;
}
