// TokenVocabulary: which tokens may come next under a JsonMatcher or a regex's CharDfa — a token
// is allowed when all its bytes continue valid text. The vocabulary is a trie of the tokens'
// bytes, so a prefix the matcher refuses rules out every token that starts with it at once, and
// the bytes tokens share are stepped once. The trie is kept flat, in preorder, so a walk reads
// it front to back (a 100K-token BPE vocabulary is ~300K nodes: one mask is ~300K steps at most).
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
inline bool HasToken(const TokenBits& bits, int32_t id) { return (bits[id / 64] >> (id % 64)) & 1; }

// Sets logits[id] to -inf for every token `bits` refuses (all of them when bits is null) and
// for `end_id` unless `may_end`; the end stays allowed when nothing else is, so never every
// token is refused.
void MaskLogits(const TokenBits* bits, int32_t vocabulary_size, int32_t end_id, bool may_end,
                absl::Span<float> logits);

class TokenVocabulary {
 public:
  // A longer token is never allowed under a constraint (no tokenizer makes one).
  static constexpr size_t kMaxTokenBytes = 1024;

  // bytes[id]: the token's bytes; empty for ids that never stand for text (specials).
  explicit TokenVocabulary(const std::vector<std::string>& bytes);

  int32_t size() const { return size_; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

  // The tokens whose bytes continue `matcher`'s text (never the specials).
  TokenBits Allowed(const JsonMatcher& matcher) const;
  TokenBits Allowed(const CharDfa& dfa, const CharDfa::Cursor& at) const;

 private:
  // One trie node but the root: the byte into it, its depth (the root's children are at 1) and
  // where its subtree ends in preorder (the next node not under it).
  struct Node {
    int32_t after = 0;
    uint16_t depth = 0;
    uint8_t byte = 0;
  };
  // Steps a copy of the parent's state by each node's byte: a refused byte skips the subtree.
  template <typename State, typename Step>
  TokenBits Walk(const State& root, Step step) const;

  int32_t size_ = 0;
  int32_t depth_ = 0;  // the longest token's bytes
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;       // preorder; [0] is the root (the empty prefix)
  std::vector<int32_t> ends_at_;  // tokens whose bytes end at node i: ends_[ends_at_[i] ...]
  std::vector<int32_t> ends_;     //   ... up to ends_[ends_at_[i + 1]]
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_TOKEN_MASK_H_
