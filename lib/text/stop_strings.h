// Finding stop strings in text that grows piece by piece: the one rule the router (which ends a
// stream at the token that completes a stop string) and the HTTP front (which cuts the stop
// string from the text it shows) must share.
#ifndef YOCO_LIB_TEXT_STOP_STRINGS_H_
#define YOCO_LIB_TEXT_STOP_STRINGS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace yoco {

struct StopMatch {
  size_t begin = 0;  // of the stop string in the text
  size_t end = 0;    // one past it
};

// The stop string that completes first in `text` among those that end after `searched`
// (text[0, searched) was searched before); of two that complete at the same byte, the longer,
// which starts first. Empty stop strings never match.
std::optional<StopMatch> FirstStopString(absl::string_view text, size_t searched,
                                         const std::vector<std::string>& stops);

}  // namespace yoco

#endif  // YOCO_LIB_TEXT_STOP_STRINGS_H_
