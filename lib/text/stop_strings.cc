// A stop string ending after `searched` starts after searched - size, so each search begins
// there: text searched before is not searched again beyond the longest stop string.
#include "lib/text/stop_strings.h"

namespace yoco {

std::optional<StopMatch> FirstStopString(absl::string_view text, size_t searched,
                                         const std::vector<std::string>& stops) {
  std::optional<StopMatch> first;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const size_t from = searched >= stop.size() ? searched - stop.size() + 1 : 0;
    const size_t at = text.find(stop, from);
    if (at == absl::string_view::npos) continue;
    const StopMatch match{at, at + stop.size()};
    if (!first || match.end < first->end ||
        (match.end == first->end && match.begin < first->begin)) {
      first = match;
    }
  }
  return first;
}

}  // namespace yoco
