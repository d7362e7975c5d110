// Shared by the fuzz targets.
#include "fuzz/fuzz_config.h"

#include <cstring>
#include <string>

#include "lib/checksum/crc32c.h"
#include "lib/checksum/message_tag.h"

namespace yoco::fuzz {

void FixTrailingCrc(std::string& bytes) {
  if (bytes.size() < 4) return;
  const uint32_t crc = Crc32c(bytes.data(), bytes.size() - 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
}

void FixSnapshotTrailer(std::string& bytes) {
  constexpr size_t kTrailer = 4 + kMessageTagBytes;
  if (bytes.size() < kTrailer) return;
  const size_t crc_at = bytes.size() - kTrailer;
  const uint32_t crc = Crc32c(bytes.data(), crc_at);
  std::memcpy(bytes.data() + crc_at, &crc, 4);
  const std::string tag = MessageTag(kCacheKey, absl::string_view(bytes.data(), crc_at + 4));
  std::memcpy(bytes.data() + crc_at + 4, tag.data(), tag.size());
}

}  // namespace yoco::fuzz
