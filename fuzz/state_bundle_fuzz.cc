// State bundles from any bytes (checksum recomputed), for fp32 and bf16 K/V workers: parsed or
// refused; what parses serializes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_config.h"
#include "lib/engine/state_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  yoco::fuzz::FixTrailingCrc(bytes);
  for (const yoco::ModelConfig* config : {&yoco::fuzz::Config(), &yoco::fuzz::Bf16KvConfig()}) {
    auto bundle = yoco::ParseStateBundle(bytes, *config, yoco::fuzz::kFingerprint);
    if (bundle.ok() && yoco::SerializeStateBundle(*bundle) != bytes) __builtin_trap();
  }
  return 0;
}
