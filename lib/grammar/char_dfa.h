// CharDfa: a deterministic automaton over Unicode code points (what a compiled regex is,
// lib/grammar/regex.h), stepped byte by byte through their UTF-8 — tokens split characters, so a
// constraint feeds it bytes. It is trimmed so that every state it reaches can still reach an
// accepting one, and a byte that starts a character is taken only if some character it can
// begin continues the text: a constraint that follows it never writes itself into a corner.
#ifndef YOCO_LIB_GRAMMAR_CHAR_DFA_H_
#define YOCO_LIB_GRAMMAR_CHAR_DFA_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace yoco {

class CharDfa {
 public:
  static constexpr int32_t kDead = -1;

  // Where a text is: the state after its whole characters, and the bytes of a character begun.
  struct Cursor {
    int32_t state = 0;
    int32_t pending = 0;  // continuation bytes still due; bits 4+: the character's length
    int32_t partial = 0;  // the bits of the character so far
    bool operator==(const Cursor&) const = default;
  };

  Cursor Start() const { return {}; }
  // Feeds one byte: false, leaving *c as it was, when it cannot continue text that will match.
  bool Step(Cursor* c, uint8_t byte) const;
  // Feeds `bytes`: false (and *c partly advanced) when one cannot continue.
  bool Walk(Cursor* c, absl::string_view bytes) const {
    for (char b : bytes) {
      if (!Step(c, static_cast<uint8_t>(b))) return false;
    }
    return true;
  }
  // Whether the text so far matches (it may end here).
  bool Accepting(const Cursor& c) const { return c.pending == 0 && accepting_[c.state] != 0; }
  // Whether some byte continues it.
  bool Open(const Cursor& c) const { return c.pending != 0 || open_[c.state] != 0; }

  int32_t size() const { return static_cast<int32_t>(accepting_.size()); }
  // The state after code point `cp` from `state`, or kDead.
  int32_t Next(int32_t state, uint32_t cp) const {
    return next_[static_cast<size_t>(state) * classes_ + ClassOf(cp)];
  }

 private:
  friend class RegexCompiler;
  int32_t ClassOf(uint32_t cp) const;
  // Whether a character in [lo, hi] continues from `state`.
  bool AnyLive(int32_t state, uint32_t lo, uint32_t hi) const;

  std::vector<uint32_t> class_starts_;      // code points where a class begins, ascending
  std::array<uint8_t, 128> ascii_class_{};  // the class of each ASCII code point
  int32_t classes_ = 1;
  std::vector<int32_t> next_;  // [state * classes_ + class]
  std::vector<uint8_t> accepting_;
  std::vector<uint8_t> open_;
  // Per state: the code points with a move, as ranges (ascending, merged).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> live_;
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_CHAR_DFA_H_
