// StopStringTrimmer: OpenAI's stop strings end the output *before* the stop string, while the
// router's stream includes the token that completed it. Fed the streamed text piece by piece,
// this gives out what can be shown now, holding back a tail that might still become a stop
// string, and nothing from a stop string on. The stop string completed first wins, as it is the
// one that ends the generation.
#ifndef YOCO_LIB_OPENAI_STOP_STRING_TRIMMER_H_
#define YOCO_LIB_OPENAI_STOP_STRING_TRIMMER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace yoco {

class StopStringTrimmer {
 public:
  explicit StopStringTrimmer(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // The text that can be shown after `piece`. Once a stop string has appeared, stopped() is
  // true and every later call gives "".
  std::string Add(absl::string_view piece);
  // What was held back, for a generation that ended without a stop string.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  const std::vector<std::string> stops_;
  std::string pending_;  // not shown yet: a possible start of a stop string
  bool stopped_ = false;
};

}  // namespace yoco

#endif  // YOCO_LIB_OPENAI_STOP_STRING_TRIMMER_H_
