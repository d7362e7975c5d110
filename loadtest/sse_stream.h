// SseStream: a text/event-stream body (what OpenAI-compatible servers stream) split into its
// events' data, fed in whatever pieces the network delivers.
#ifndef YOCO_LOADTEST_SSE_STREAM_H_
#define YOCO_LOADTEST_SSE_STREAM_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace yoco {

class SseStream {
 public:
  // Appends `bytes`; returns the data of every event they complete, in order (an event's
  // "data:" lines joined by "\n"; events without data, comments and other fields are skipped).
  std::vector<std::string> Feed(absl::string_view bytes);

 private:
  std::string line_;  // the unfinished line
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
};

}  // namespace yoco

#endif  // YOCO_LOADTEST_SSE_STREAM_H_
