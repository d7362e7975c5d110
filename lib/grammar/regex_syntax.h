// ParseRegex: a pattern's text (the ECMAScript syntax lib/grammar/regex.h lists) parsed into a
// tree of code-point sets, sequences, alternatives and repeats — the syntax half of compiling
// it; the automaton half is in regex.cc. Refusals name what is not supported and where.
#ifndef YOCO_LIB_GRAMMAR_REGEX_SYNTAX_H_
#define YOCO_LIB_GRAMMAR_REGEX_SYNTAX_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

inline constexpr uint32_t kMaxCodePoint = 0x10ffff;

// Sorted, disjoint, non-adjacent code-point ranges.
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

struct RegexNode {
  enum class Kind { kSet, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;  // with no children: the empty text
  CodePointRanges set;        // kSet: never a surrogate
  std::vector<RegexNode> children;
  int min = 0;   // kRepeat: the child min to max times
  int max = -1;  // -1: unbounded

  static RegexNode Set(CodePointRanges set);
};

// A top-level alternative of the pattern, with its anchors (^ and $ stand nowhere else).
struct RegexBranch {
  RegexNode node;
  bool anchored_start = false;
  bool anchored_end = false;
};

// INVALID_ARGUMENT "at offset N: ..." for a pattern it cannot read or does not support.
absl::StatusOr<std::vector<RegexBranch>> ParseRegex(absl::string_view pattern);

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_REGEX_SYNTAX_H_
