// TokenTextStream: the text half of a token stream. Tokens are byte strings and a character may
// span tokens, so each token's text is the valid UTF-8 its bytes complete; a token the tokenizer
// cannot spell shows as U+FFFD; the stream notes the token that completes a stop string.
#ifndef YOCO_LIB_TEXT_TOKEN_TEXT_STREAM_H_
#define YOCO_LIB_TEXT_TOKEN_TEXT_STREAM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yoco {

class TokenTextStream {
 public:
  explicit TokenTextStream(std::vector<std::string> stop_strings = {});

  // The text this token's bytes (or, when the tokenizer could not spell it, U+FFFD) complete.
  std::string Add(const absl::StatusOr<std::string>& token_bytes);
  // Whether the text so far contains a stop string (set by the token that completed it).
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string bytes_;  // not yet valid UTF-8: the start of a character the next token completes
  std::string tail_;   // the last text, as long as the longest stop string less a byte
  bool stopped_ = false;
};

}  // namespace yoco

#endif  // YOCO_LIB_TEXT_TOKEN_TEXT_STREAM_H_
