// Shared by the fuzz targets.
#include "fuzz/fuzz_config.h"

#include <cstring>
#include <string>

#include "lib/checksum/crc32c.h"

namespace yoco::fuzz {

void FixTrailingCrc(std::string& bytes) {
  if (bytes.size() < 4) return;
  const uint32_t crc = Crc32c(bytes.data(), bytes.size() - 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
}

}  // namespace yoco::fuzz
