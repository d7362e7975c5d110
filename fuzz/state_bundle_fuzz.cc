// State bundles and bundle parts from any bytes (checksum recomputed), for fp32 and bf16 K/V
// workers: parsed or refused; a bundle that parses with all its rows serializes back to the same
// bytes (one that leaves rows out parses to the rest only).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_config.h"
#include "lib/engine/bundle_part.h"
#include "lib/engine/state_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  yoco::fuzz::FixTrailingCrc(bytes);
  for (const yoco::ModelConfig* config : {&yoco::fuzz::Config(), &yoco::fuzz::Bf16KvConfig()}) {
    auto bundle = yoco::ParseStateBundle(bytes, *config, yoco::fuzz::kFingerprint);
    if (bundle.ok() && bundle->resident_chunks == 0 && bundle->parts == 0 &&
        yoco::SerializeStateBundle(*bundle) != bytes) {
      __builtin_trap();
    }
    auto part = yoco::ParseBundlePart(bytes, *config, yoco::fuzz::kFingerprint);
    if (part.ok() && (part->k.rows() != part->v.rows() || part->k.rows() == 0)) __builtin_trap();
  }
  return 0;
}
