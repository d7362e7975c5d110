// Prefix-cache snapshot files and manifests from any bytes (checksum and tag recomputed), for
// fp32 and bf16 K/V workers: parsed or refused; what parses has the size its header implies and
// serializes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_config.h"
#include "lib/cache/snapshot_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  yoco::fuzz::FixSnapshotTrailer(bytes);
  for (const yoco::ModelConfig* config : {&yoco::fuzz::Config(), &yoco::fuzz::Bf16KvConfig()}) {
    auto file =
        yoco::ParseSnapshotFile(bytes, *config, yoco::fuzz::kFingerprint, yoco::fuzz::kCacheKey);
    if (!file.ok()) continue;
    auto expected = yoco::SnapshotFileBytes(bytes, *config);
    if (!expected.ok() || *expected != bytes.size()) __builtin_trap();
    if (yoco::SerializeSnapshotFile(*file, yoco::fuzz::kFingerprint, yoco::fuzz::kCacheKey) !=
        bytes)
      __builtin_trap();
  }
  // The same bytes as the disk tier's manifest (version 3): parsed or refused, and what parses
  // serializes back to the same bytes.
  for (const yoco::ModelConfig* config : {&yoco::fuzz::Config(), &yoco::fuzz::Bf16KvConfig()}) {
    auto manifest = yoco::ParseSnapshotManifest(bytes, *config, yoco::fuzz::kFingerprint,
                                                yoco::fuzz::kCacheKey);
    if (!manifest.ok()) continue;
    auto expected = yoco::SnapshotFileBytes(bytes, *config);
    if (!expected.ok() || *expected != bytes.size()) __builtin_trap();
    if (yoco::SerializeSnapshotManifest(*manifest, yoco::fuzz::kFingerprint,
                                        yoco::fuzz::kCacheKey) != bytes)
      __builtin_trap();
  }
  return 0;
}
