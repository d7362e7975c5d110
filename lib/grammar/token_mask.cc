// The trie walk: each child's byte is fed to a copy of its parent's matcher (or cursor).
#include "lib/grammar/token_mask.h"

#include <algorithm>
#include <cmath>

namespace yoco {

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& bytes)
    : size_(static_cast<int32_t>(bytes.size())), bytes_(bytes) {
  trie_.emplace_back();
  for (int32_t id = 0; id < size_; ++id) {
    if (bytes[id].empty()) continue;
    int32_t node = 0;
    for (char ch : bytes[id]) {
      const uint8_t b = static_cast<uint8_t>(ch);
      auto& children = trie_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, int32_t{0}),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it != children.end() && it->first == b) {
        node = it->second;
        continue;
      }
      const int32_t child = static_cast<int32_t>(trie_.size());
      children.insert(it, {b, child});
      trie_.emplace_back();
      node = child;
    }
    trie_[node].ends.push_back(id);
  }
}

void TokenVocabulary::Allowed(const JsonMatcher& matcher, std::vector<uint8_t>* allowed) const {
  allowed->assign(size_, 0);
  Walk(0, matcher, allowed);
}

void TokenVocabulary::Walk(int32_t node, const JsonMatcher& matcher,
                           std::vector<uint8_t>* allowed) const {
  for (int32_t id : trie_[node].ends) (*allowed)[id] = 1;
  for (const auto& [byte, child] : trie_[node].children) {
    JsonMatcher next = matcher;
    const char ch = static_cast<char>(byte);
    if (next.Advance({&ch, 1})) Walk(child, next, allowed);
  }
}

void TokenVocabulary::Allowed(const CharDfa& dfa, const CharDfa::Cursor& at,
                              std::vector<uint8_t>* allowed) const {
  allowed->assign(size_, 0);
  Walk(0, dfa, at, allowed);
}

void TokenVocabulary::Walk(int32_t node, const CharDfa& dfa, const CharDfa::Cursor& at,
                           std::vector<uint8_t>* allowed) const {
  for (int32_t id : trie_[node].ends) (*allowed)[id] = 1;
  for (const auto& [byte, child] : trie_[node].children) {
    CharDfa::Cursor next = at;
    if (dfa.Step(&next, byte)) Walk(child, dfa, next, allowed);
  }
}

TokenBits ToTokenBits(const std::vector<uint8_t>& allowed) {
  TokenBits bits((allowed.size() + 63) / 64, 0);
  for (size_t id = 0; id < allowed.size(); ++id) {
    if (allowed[id]) bits[id / 64] |= uint64_t{1} << (id % 64);
  }
  return bits;
}

void MaskLogits(const TokenBits* bits, int32_t vocabulary_size, int32_t end_id, bool may_end,
                absl::Span<float> logits) {
  bool any = false;
  if (bits != nullptr) {
    for (uint64_t word : *bits) any |= word != 0;
  }
  for (size_t id = 0; id < logits.size(); ++id) {
    const int32_t i = static_cast<int32_t>(id);
    const bool allowed = i == end_id
                             ? may_end || !any
                             : any && i < vocabulary_size && ((*bits)[id / 64] >> (id % 64)) & 1;
    if (!allowed) logits[id] = -INFINITY;
  }
}

}  // namespace yoco
