// CompileRegex: a regular expression — the ECMAScript syntax JSON Schema's `pattern` uses, as a
// validator with the `u` flag reads it (ajv does) — compiled into a CharDfa.
// Supported: literals, '.', classes ([a-z], [^...]) with \d \w \s \D \W \S, escapes (\t \n \r
// \f \v \0 \xHH \uHHHH \u{H...}, escaped syntax characters), groups ((...), (?:...),
// (?<name>...)), alternation, quantifiers (* + ? {n} {n,} {n,m}, lazy or not: the same strings
// match), and ^ / $ at the start / end of the pattern or of one of its top-level alternatives.
// Refused by name: backreferences, lookaround, word boundaries, \p{...}, flags; patterns whose
// automaton would pass the size limits. The text matched is always valid UTF-8.
#ifndef YOCO_LIB_GRAMMAR_REGEX_H_
#define YOCO_LIB_GRAMMAR_REGEX_H_

#include <bitset>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/grammar/char_dfa.h"

namespace yoco {

struct RegexOptions {
  // false: the whole text must match (a regex constraint on an answer). true: a match anywhere
  // will do unless ^ / $ anchor it (JSON Schema's pattern).
  bool search = false;
  // The text's length bounds in code points (JSON Schema's minLength / maxLength); -1: none.
  int64_t min_chars = 0;
  int64_t max_chars = -1;
  // The ASCII characters the text may hold (a JSON string cannot write most control ones).
  std::bitset<128> ascii = std::bitset<128>().set();
  // The most automaton states it may take (compiling costs ~1-10 us a state).
  int max_states = 4096;
  // The most NFA states it may visit while determinising (30M: ~0.1 s), which bounds the time
  // whatever the pattern — routers compile what clients send. *work_used (when given) is set to
  // what it took, so a caller compiling several (a schema's patterns) can share one budget.
  int64_t max_work = 30'000'000;
  int64_t* work_used = nullptr;
};

// INVALID_ARGUMENT naming the problem and its offset in the pattern; also when no text matches
// within the options (e.g. lengths the pattern cannot meet) or the automaton would be too large.
absl::StatusOr<CharDfa> CompileRegex(absl::string_view pattern, const RegexOptions& options = {});

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_REGEX_H_
