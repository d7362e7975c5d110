// Stop strings cut from the shown text. Text before `pending_` was shown only once no stop
// string could start in it, so a stop string lies wholly inside `pending_`.
#include "lib/openai/stop_string_trimmer.h"

#include <algorithm>
#include <optional>

#include "lib/text/stop_strings.h"

namespace yoco {

std::string StopStringTrimmer::Add(absl::string_view piece) {
  if (stopped_) return "";
  pending_.append(piece.data(), piece.size());
  // The stop string completed first ends the text (as it ends the generation).
  if (std::optional<StopMatch> stop = FirstStopString(pending_, 0, stops_)) {
    stopped_ = true;
    std::string out = pending_.substr(0, stop->begin);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    if (stop.empty()) continue;
    for (size_t k = std::min(stop.size() - 1, pending_.size()); k > hold; --k) {
      if (absl::string_view(pending_).substr(pending_.size() - k) ==
          absl::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringTrimmer::Flush() {
  if (stopped_) return "";
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace yoco
