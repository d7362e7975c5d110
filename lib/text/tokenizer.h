// Tokenizer: text <-> model token ids. Ids 0..3 are the reference's reserved specials
// (<s> BOS, <pad>, </s> EOS, <unk>); every other id is the underlying tokenizer's id + 4.
#ifndef YOCO_LIB_TEXT_TOKENIZER_H_
#define YOCO_LIB_TEXT_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace yoco {

// The reference's id shift: model id = tokenizer id + 4.
inline constexpr int32_t kTokenizerIdOffset = 4;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Model ids of `text` (no BOS added). INVALID_ARGUMENT for text the tokenizer cannot take
  // (e.g. invalid UTF-8 for a BPE).
  virtual absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const = 0;
  // The bytes of `ids`; ids below 4 are dropped, unknown ids are INVALID_ARGUMENT. The result
  // may end inside a UTF-8 sequence when `ids` is a prefix of a longer output.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const = 0;
  // One past the largest id Encode can produce.
  virtual int32_t id_limit() const = 0;
};

// Each id's bytes for ids [0, vocab_size): what structured output masks tokens by. Specials and
// ids the tokenizer cannot spell (beyond id_limit) are empty: they never stand for text.
std::vector<std::string> TokenBytes(const Tokenizer& tokenizer, int32_t vocab_size);

// A stable 64-bit identity of token_bytes (FNV-1a over each id's length and bytes; never 0):
// the router and its workers compare theirs, since masks made over another vocabulary would
// let through tokens that spell invalid text.
uint64_t VocabularyFingerprint(const std::vector<std::string>& token_bytes);

}  // namespace yoco

#endif  // YOCO_LIB_TEXT_TOKENIZER_H_
