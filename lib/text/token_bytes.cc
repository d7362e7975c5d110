// TokenBytes: one Decode per id.
#include "lib/text/tokenizer.h"

namespace yoco {

std::vector<std::string> TokenBytes(const Tokenizer& tokenizer, int32_t vocab_size) {
  std::vector<std::string> bytes(vocab_size);
  for (int32_t id = kTokenizerIdOffset; id < vocab_size && id < tokenizer.id_limit(); ++id) {
    absl::StatusOr<std::string> b = tokenizer.Decode({&id, 1});
    if (b.ok()) bytes[id] = *std::move(b);
  }
  return bytes;
}

}  // namespace yoco
