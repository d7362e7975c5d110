// State bundles and bundle parts from any bytes (checksum recomputed), for fp32 and bf16 K/V
// workers: parsed or refused; a bundle that parses with all its rows serializes back to the same
// bytes (one that leaves rows out parses to the rest only); bytes of a part's size landed in
// chunks (as a decode worker receives them) give what ParseBundlePart gives.
#include <cstddef>
#include <cstdint>
#include <cstring>
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
    auto landing = yoco::BundlePartLanding::ForSize(*config, bytes.size());
    if (landing == nullptr) continue;
    size_t at = 0;
    for (absl::Span<uint8_t> s : landing->segments()) {
      std::memcpy(s.data(), bytes.data() + at, s.size());
      at += s.size();
    }
    if (at != bytes.size() || landing->Gather() != bytes) __builtin_trap();
    if (!landing->HoldsChunkPart()) continue;
    auto landed = landing->Take(*config, yoco::fuzz::kFingerprint);
    if (landed.ok() != part.ok() || landed.status().code() != part.status().code()) {
      __builtin_trap();
    }
    if (landed.ok() && (landed->row0 != part->row0 || landed->index != part->index ||
                        !(landed->k == part->k) || !(landed->v == part->v))) {
      __builtin_trap();
    }
  }
  return 0;
}
