// Only the unfinished character's bytes and the text a stop string could still straddle are
// kept, so a long stream holds a few bytes, not its whole output.
#include "lib/text/token_text_stream.h"

#include <algorithm>

#include "lib/text/stop_strings.h"
#include "lib/text/utf8_stream.h"

namespace yoco {

TokenTextStream::TokenTextStream(std::vector<std::string> stop_strings)
    : stops_(std::move(stop_strings)) {
  for (const std::string& s : stops_) longest_stop_ = std::max(longest_stop_, s.size());
}

std::string TokenTextStream::Add(const absl::StatusOr<std::string>& token_bytes) {
  bytes_ += token_bytes.ok() ? *token_bytes : std::string("\xEF\xBF\xBD");
  size_t pos = 0;
  std::string text;
  AppendValidUtf8(bytes_, &pos, &text);
  bytes_.erase(0, pos);
  if (longest_stop_ > 0 && !text.empty()) {
    const size_t searched = tail_.size();
    tail_ += text;
    if (FirstStopString(tail_, searched, stops_).has_value()) stopped_ = true;
    if (tail_.size() >= longest_stop_) tail_.erase(0, tail_.size() - (longest_stop_ - 1));
  }
  return text;
}

}  // namespace yoco
