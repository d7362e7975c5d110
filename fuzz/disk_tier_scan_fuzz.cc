// The disk tier's start-up scan over a folder holding one file of any bytes (checksum
// and tag recomputed) under a snapshot's name: it opens, and the file is either registered and
// loads, or is discarded.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_config.h"
#include "lib/cache/snapshot_disk_tier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir =
      std::filesystem::temp_directory_path() / ("yoco-fuzz-tier-" + std::to_string(getpid()));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  std::string bytes(reinterpret_cast<const char*>(data), size);
  yoco::fuzz::FixSnapshotTrailer(bytes);
  // The name the file would have if its first block key were all 0x5a.
  yoco::BlockKey key;
  key.bytes.fill(0x5a);
  std::ofstream(dir + "/" + key.Hex() + ".snap", std::ios::binary) << bytes;
  std::vector<yoco::DiscardedSnapshot> discarded;
  auto tier =
      yoco::SnapshotDiskTier::Open({dir, int64_t{1} << 26, yoco::fuzz::kCacheKey},
                                   yoco::fuzz::Config(), yoco::fuzz::kFingerprint, &discarded);
  if (!tier.ok()) __builtin_trap();  // one bad file never stops the worker
  if ((*tier)->size() + discarded.size() != 1) __builtin_trap();
  if ((*tier)->size() == 1 && !(*tier)->Load(key).ok()) __builtin_trap();
  return 0;
}
