// TokenVocabulary: which tokens may come next under a JsonMatcher or a regex's CharDfa — a token
// is allowed when all its bytes continue valid text. The vocabulary is a trie of the tokens'
// bytes, so a prefix the matcher refuses rules out every token that starts with it at once, and
// the bytes tokens share are stepped once.
#ifndef YOCO_LIB_GRAMMAR_TOKEN_MASK_H_
#define YOCO_LIB_GRAMMAR_TOKEN_MASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "lib/grammar/char_dfa.h"
#include "lib/grammar/json_matcher.h"

namespace yoco {

// Which tokens may come next, bit id per token.
using TokenBits = std::vector<uint64_t>;
TokenBits ToTokenBits(const std::vector<uint8_t>& allowed);

// Sets logits[id] to -inf for every token `bits` refuses (all of them when bits is null) and
// for `end_id` unless `may_end`; the end stays allowed when nothing else is, so never every
// token is refused.
void MaskLogits(const TokenBits* bits, int32_t vocabulary_size, int32_t end_id, bool may_end,
                absl::Span<float> logits);

class TokenVocabulary {
 public:
  // bytes[id]: the token's bytes; empty for ids that never stand for text (specials).
  explicit TokenVocabulary(const std::vector<std::string>& bytes);

  int32_t size() const { return size_; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

  // allowed[id] = 1 when token id's bytes continue `matcher`'s text (0 for specials).
  void Allowed(const JsonMatcher& matcher, std::vector<uint8_t>* allowed) const;
  void Allowed(const CharDfa& dfa, const CharDfa::Cursor& at, std::vector<uint8_t>* allowed) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node, ascending
    std::vector<int32_t> ends;                          // tokens whose bytes end here
  };
  void Walk(int32_t node, const JsonMatcher& matcher, std::vector<uint8_t>* allowed) const;
  void Walk(int32_t node, const CharDfa& dfa, const CharDfa::Cursor& at,
            std::vector<uint8_t>* allowed) const;

  int32_t size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<Node> trie_;  // [0]: the root (the empty prefix)
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_TOKEN_MASK_H_
