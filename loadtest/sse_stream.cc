// Line-by-line event-stream parsing (the WHATWG "server-sent events" rules, data field only).
#include "loadtest/sse_stream.h"

#include "absl/strings/strip.h"

namespace yoco {

std::vector<std::string> SseStream::Feed(absl::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    absl::string_view line = line_;
    absl::ConsumeSuffix(&line, "\r");
    if (line.empty()) {  // a blank line ends the event
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (absl::ConsumePrefix(&line, "data:")) {
      absl::ConsumePrefix(&line, " ");
      if (has_data_) data_ += '\n';
      data_.append(line.data(), line.size());
      has_data_ = true;
    }
    line_.clear();
  }
  return events;
}

}  // namespace yoco
