// FileSeal: the trailer of every file a worker writes for itself or another worker to read back
// (snapshot files, manifests, K/V block files): a CRC-32C of the bytes before it, then their
// MessageTag (HMAC-SHA256) under the cluster's cache key. The CRC tells an accident (DATA_LOSS,
// "corrupt"); the tag tells a file changed or made without the key (UNAUTHENTICATED), which a
// CRC alone cannot, since whoever can write the volume can recompute it.
#ifndef YOCO_LIB_CHECKSUM_FILE_SEAL_H_
#define YOCO_LIB_CHECKSUM_FILE_SEAL_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/checksum/message_tag.h"

namespace yoco {

inline constexpr size_t kFileSealBytes = 4 + kMessageTagBytes;

// Appends the seal of everything `out` holds.
void AppendFileSeal(absl::string_view cache_key, std::string* out);

// Whether `bytes` ends with the seal of what precedes it. `what` names the kind of file in the
// messages ("snapshot file"). DATA_LOSS also for fewer than kFileSealBytes bytes.
absl::Status CheckFileSeal(absl::string_view bytes, absl::string_view cache_key,
                           absl::string_view what);

}  // namespace yoco

#endif  // YOCO_LIB_CHECKSUM_FILE_SEAL_H_
