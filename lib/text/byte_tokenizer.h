// ByteTokenizer: one token per byte (model id = byte + 4), for small models without a
// vocabulary of their own. Any byte string round-trips.
#ifndef YOCO_LIB_TEXT_BYTE_TOKENIZER_H_
#define YOCO_LIB_TEXT_BYTE_TOKENIZER_H_

#include "lib/text/tokenizer.h"

namespace yoco {

class ByteTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t id_limit() const override { return 256 + kTokenizerIdOffset; }
};

}  // namespace yoco

#endif  // YOCO_LIB_TEXT_BYTE_TOKENIZER_H_
