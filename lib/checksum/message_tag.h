// MessageTag: HMAC-SHA256 over bytes that cross a trust boundary (transport addresses handed
// around through the router, prefix-cache snapshot files on a shared volume or copied between
// workers). Under a secret key only its holders can make a tag that matches; under the empty key
// the tag still catches corruption, but not a forger.
#ifndef YOCO_LIB_CHECKSUM_MESSAGE_TAG_H_
#define YOCO_LIB_CHECKSUM_MESSAGE_TAG_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace yoco {

inline constexpr size_t kMessageTagBytes = 32;

// kMessageTagBytes bytes.
std::string MessageTag(absl::string_view key, absl::string_view data);

// Whether `tag` is the tag of `data` under `key`, compared in constant time.
bool MessageTagMatches(absl::string_view key, absl::string_view data, absl::string_view tag);

}  // namespace yoco

#endif  // YOCO_LIB_CHECKSUM_MESSAGE_TAG_H_
