// The trie is built linked, then laid out in preorder; the walk keeps one state per depth (the
// path from the root), so stepping a node copies its parent's state into a slot already sized.
#include "lib/grammar/token_mask.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

namespace yoco {
namespace {

struct LinkedNode {
  std::map<uint8_t, std::unique_ptr<LinkedNode>> children;
  std::vector<int32_t> ends;
};

}  // namespace

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& bytes)
    : size_(static_cast<int32_t>(bytes.size())), bytes_(bytes) {
  LinkedNode root;
  for (int32_t id = 0; id < size_; ++id) {
    if (bytes[id].empty() || bytes[id].size() > kMaxTokenBytes) continue;
    LinkedNode* node = &root;
    for (char ch : bytes[id]) {
      std::unique_ptr<LinkedNode>& child = node->children[static_cast<uint8_t>(ch)];
      if (child == nullptr) child = std::make_unique<LinkedNode>();
      node = child.get();
    }
    node->ends.push_back(id);
    depth_ = std::max(depth_, static_cast<int32_t>(bytes[id].size()));
  }
  // Preorder by an explicit stack (a token's length bounds the depth, not the call stack).
  struct Visit {
    const LinkedNode* node;
    uint8_t byte;
    uint16_t depth;
  };
  std::vector<Visit> stack = {{&root, 0, 0}};
  std::vector<int32_t> open;  // the nodes on the current path, to close their subtrees
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    const int32_t index = static_cast<int32_t>(nodes_.size());
    while (!open.empty() && nodes_[open.back()].depth >= v.depth) {
      nodes_[open.back()].after = index;
      open.pop_back();
    }
    nodes_.push_back({0, v.depth, v.byte});
    open.push_back(index);
    ends_at_.push_back(static_cast<int32_t>(ends_.size()));
    ends_.insert(ends_.end(), v.node->ends.begin(), v.node->ends.end());
    for (auto it = v.node->children.rbegin(); it != v.node->children.rend(); ++it) {
      stack.push_back({it->second.get(), it->first, static_cast<uint16_t>(v.depth + 1)});
    }
  }
  for (int32_t index : open) nodes_[index].after = static_cast<int32_t>(nodes_.size());
  ends_at_.push_back(static_cast<int32_t>(ends_.size()));
}

template <typename State, typename Step>
TokenBits TokenVocabulary::Walk(const State& root, Step step) const {
  TokenBits bits((size_ + 63) / 64, 0);
  std::vector<State> path(depth_ + 1, root);
  const int32_t n = static_cast<int32_t>(nodes_.size());
  for (int32_t i = 1; i < n;) {
    const Node& node = nodes_[i];
    State& state = path[node.depth];
    state = path[node.depth - 1];
    if (!step(&state, node.byte)) {
      i = node.after;
      continue;
    }
    for (int32_t e = ends_at_[i]; e < ends_at_[i + 1]; ++e) {
      bits[ends_[e] / 64] |= uint64_t{1} << (ends_[e] % 64);
    }
    ++i;
  }
  return bits;
}

TokenBits TokenVocabulary::Allowed(const JsonMatcher& matcher) const {
  return Walk(matcher, [](JsonMatcher* m, uint8_t byte) {
    const char ch = static_cast<char>(byte);
    return m->Advance({&ch, 1});
  });
}

TokenBits TokenVocabulary::Allowed(const CharDfa& dfa, const CharDfa::Cursor& at) const {
  return Walk(at, [&dfa](CharDfa::Cursor* c, uint8_t byte) { return dfa.Step(c, byte); });
}

void MaskLogits(const TokenBits* bits, int32_t vocabulary_size, int32_t end_id, bool may_end,
                absl::Span<float> logits) {
  bool any = false;
  if (bits != nullptr) {
    for (uint64_t word : *bits) any |= word != 0;
  }
  const size_t n = logits.size();
  const bool has_end = end_id >= 0 && static_cast<size_t>(end_id) < n;
  const float end_logit = has_end ? logits[end_id] : 0.0f;
  const size_t known = any ? std::min(n, static_cast<size_t>(vocabulary_size)) : 0;
  // Word by word, without a branch per token: a mask allows about half of a BPE vocabulary in
  // no order a branch predictor could follow.
  for (size_t w = 0; w * 64 < known; ++w) {
    const uint64_t word = (*bits)[w];
    if (word == ~uint64_t{0}) continue;
    float* at = logits.data() + w * 64;
    const size_t count = std::min<size_t>(64, known - w * 64);
    for (size_t k = 0; k < count; ++k) at[k] = (word >> k) & 1 ? at[k] : -INFINITY;
  }
  for (size_t id = known; id < n; ++id) logits[id] = -INFINITY;
  if (has_end) logits[end_id] = may_end || !any ? end_logit : -INFINITY;
}

}  // namespace yoco
