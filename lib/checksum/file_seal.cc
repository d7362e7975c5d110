// The seal's two checks, the CRC first: a damaged file is "corrupt" whatever its tag.
#include "lib/checksum/file_seal.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/checksum/crc32c.h"

namespace yoco {

void AppendFileSeal(absl::string_view cache_key, std::string* out) {
  const uint32_t crc = Crc32c(out->data(), out->size());
  out->append(reinterpret_cast<const char*>(&crc), sizeof crc);
  *out += MessageTag(cache_key, *out);
}

absl::Status CheckFileSeal(absl::string_view bytes, absl::string_view cache_key,
                           absl::string_view what) {
  if (bytes.size() < kFileSealBytes) {
    return absl::DataLossError(absl::StrCat(what, " is truncated"));
  }
  const size_t crc_at = bytes.size() - kFileSealBytes;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + crc_at, 4);
  if (Crc32c(bytes.data(), crc_at) != stored_crc) {
    return absl::DataLossError(absl::StrCat(what, " checksum mismatch (corrupt or truncated)"));
  }
  if (!MessageTagMatches(cache_key, bytes.substr(0, crc_at + 4), bytes.substr(crc_at + 4))) {
    return absl::UnauthenticatedError(
        cache_key.empty()
            ? absl::StrCat(what, " was written under a cache key and this worker has none")
            : absl::StrCat(what,
                           " is not authenticated by this worker's cache key (changed or made "
                           "without it)"));
  }
  return absl::OkStatus();
}

}  // namespace yoco
