// The parser: recursive descent over the pattern's UTF-8, one code point at a time.
#include "lib/grammar/regex_syntax.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

constexpr int kMaxRepeat = 1000;    // n and m of {n,m}
constexpr int kMaxGroupDepth = 32;  // nested groups

using Ranges = CodePointRanges;

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

Ranges WithoutSurrogates(const Ranges& r) {
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (hi < 0xd800 || lo > 0xdfff) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xd800) out.push_back({lo, 0xd7ff});
    if (hi > 0xdfff) out.push_back({0xe000, hi});
  }
  return out;
}

const Ranges& Digits() {
  static const Ranges r = {{'0', '9'}};
  return r;
}
const Ranges& WordCharacters() {
  static const Ranges r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
// ECMAScript's WhiteSpace and LineTerminator.
const Ranges& Spaces() {
  static const Ranges r = {{0x09, 0x0d},     {0x20, 0x20},     {0xa0, 0xa0},     {0x1680, 0x1680},
                           {0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f},
                           {0x3000, 0x3000}, {0xfeff, 0xfeff}};
  return r;
}
const Ranges& LineTerminators() {
  static const Ranges r = {{0x0a, 0x0a}, {0x0d, 0x0d}, {0x2028, 0x2029}};
  return r;
}

bool IsSyntaxCharacter(char c) {
  return absl::string_view("^$\\.*+?()[]{}|/").find(c) != absl::string_view::npos;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(absl::string_view pattern) : p_(pattern) {}

  absl::StatusOr<std::vector<RegexBranch>> Parse() {
    std::vector<RegexBranch> branches;
    while (true) {
      RegexBranch b;
      absl::StatusOr<RegexNode> seq = Sequence(0, &b);
      if (!seq.ok()) return seq.status();
      b.node = *std::move(seq);
      branches.push_back(std::move(b));
      if (AtEnd()) return branches;
      if (Peek() == ')') return Error("unmatched )");
      ++pos_;  // '|'
    }
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("at offset ", pos_, ": ", what));
  }

  // Terms up to '|', ')' or the end. At the top (`top` set) a leading ^ and a trailing $ anchor.
  absl::StatusOr<RegexNode> Sequence(int depth, RegexBranch* top) {
    RegexNode seq;
    if (top != nullptr && Peek() == '^' && !AtEnd()) {
      ++pos_;
      top->anchored_start = true;
    }
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '^' || (Peek() == '$' && top == nullptr)) {
        return Error(
            "^ and $ are supported only at the start and end of the pattern or of one of its "
            "top-level alternatives");
      }
      if (Peek() == '$') {
        ++pos_;
        if (!AtEnd() && Peek() != '|') {
          return Error(
              "$ is supported only at the end of the pattern or of a top-level alternative");
        }
        top->anchored_end = true;
        break;
      }
      absl::StatusOr<RegexNode> atom = Atom(depth);
      if (!atom.ok()) return atom.status();
      absl::StatusOr<RegexNode> term = Quantified(*std::move(atom));
      if (!term.ok()) return term.status();
      seq.children.push_back(*std::move(term));
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  absl::StatusOr<RegexNode> Group(int depth) {
    ++pos_;  // '('
    if (Peek() == '?') {
      ++pos_;
      if (Peek() == ':') {
        ++pos_;
      } else if (Peek() == '=' || Peek() == '!' ||
                 (Peek() == '<' && (Peek(1) == '=' || Peek(1) == '!'))) {
        return Error("lookahead and lookbehind are not supported");
      } else if (Peek() == '<') {
        ++pos_;
        while (!AtEnd() && Peek() != '>') {
          const char c = Peek();
          if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$')) {
            return Error("a group name has letters, digits, _ and $");
          }
          ++pos_;
        }
        if (AtEnd()) return Error("unterminated group name");
        ++pos_;  // '>'
      } else {
        return Error("(? must start (?:...) or (?<name>...); flags are not supported");
      }
    }
    if (depth + 1 > kMaxGroupDepth) return Error("groups are nested too deeply");
    RegexNode alt;
    alt.kind = RegexNode::Kind::kAlt;
    while (true) {
      absl::StatusOr<RegexNode> seq = Sequence(depth + 1, nullptr);
      if (!seq.ok()) return seq.status();
      alt.children.push_back(*std::move(seq));
      if (AtEnd()) return Error("unterminated group: ( without )");
      if (Peek() == ')') break;
      ++pos_;  // '|'
    }
    ++pos_;  // ')'
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  absl::StatusOr<RegexNode> Atom(int depth) {
    switch (Peek()) {
      case '(':
        return Group(depth);
      case '[':
        return Class();
      case '.':
        ++pos_;
        return RegexNode::Set(Complement(LineTerminators()));
      case '\\': {
        absl::StatusOr<Ranges> set = Escape(/*in_class=*/false, nullptr);
        if (!set.ok()) return set.status();
        return RegexNode::Set(*std::move(set));
      }
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat");
      case '{':
      case '}':
      case ']':
        return Error(
            absl::StrCat("a ", std::string(1, Peek()), " that stands for itself must be escaped"));
      default: {
        absl::StatusOr<uint32_t> cp = CodePoint();
        if (!cp.ok()) return cp.status();
        return RegexNode::Set({{*cp, *cp}});
      }
    }
  }

  absl::StatusOr<RegexNode> Quantified(RegexNode atom) {
    int min = 0, max = -1;
    switch (Peek()) {
      case '*':
        ++pos_;
        break;
      case '+':
        ++pos_;
        min = 1;
        break;
      case '?':
        ++pos_;
        max = 1;
        break;
      case '{': {
        ++pos_;
        absl::StatusOr<int> n = Count();
        if (!n.ok()) return n.status();
        min = max = *n;
        if (Peek() == ',') {
          ++pos_;
          max = -1;
          if (Peek() != '}') {
            absl::StatusOr<int> m = Count();
            if (!m.ok()) return m.status();
            max = *m;
            if (max < min) return Error("{n,m} with m below n");
          }
        }
        if (Peek() != '}') return Error("a quantifier is {n}, {n,} or {n,m}");
        ++pos_;
        break;
      }
      default:
        return atom;
    }
    if (Peek() == '?') ++pos_;  // lazy: the same texts match
    if (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{') {
      return Error("nothing to repeat");
    }
    RegexNode repeat;
    repeat.kind = RegexNode::Kind::kRepeat;
    repeat.min = min;
    repeat.max = max;
    repeat.children.push_back(std::move(atom));
    return repeat;
  }

  absl::StatusOr<int> Count() {
    int n = 0, digits = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      n = n * 10 + (Peek() - '0');
      ++pos_;
      if (++digits > 4 || n > kMaxRepeat) {
        return Error(absl::StrCat("repeat counts above ", kMaxRepeat, " are not supported"));
      }
    }
    if (digits == 0) return Error("a quantifier is {n}, {n,} or {n,m}");
    return n;
  }

  // One code point of the pattern's UTF-8 text.
  absl::StatusOr<uint32_t> CodePoint() {
    const uint8_t c = static_cast<uint8_t>(Peek());
    int n = c < 0x80                 ? 1
            : c >= 0xc2 && c <= 0xdf ? 2
            : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4
                                     : 0;
    if (n == 0 || pos_ + n > p_.size()) return Error("the pattern is not valid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < n; ++i) {
      const uint8_t b = static_cast<uint8_t>(p_[pos_ + i]);
      if ((b & 0xc0) != 0x80) return Error("the pattern is not valid UTF-8");
      cp = (cp << 6) | (b & 0x3f);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > kMaxCodePoint || (cp >= 0xd800 && cp <= 0xdfff)) {
      return Error("the pattern is not valid UTF-8");
    }
    pos_ += n;
    return cp;
  }

  absl::StatusOr<uint32_t> Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexValue(Peek());
      if (h < 0) return Error("expected a hex digit");
      v = v * 16 + h;
      ++pos_;
    }
    return v;
  }

  // \u escapes: HHHH (a surrogate pair of two makes one code point) or {H...}.
  absl::StatusOr<uint32_t> UnicodeEscape() {
    if (Peek() == '{') {
      ++pos_;
      uint32_t v = 0;
      int digits = 0;
      while (Peek() != '}') {
        const int h = HexValue(Peek());
        if (h < 0) return Error("\\u{...} holds hex digits");
        v = v * 16 + h;
        ++pos_;
        if (++digits > 6 || v > kMaxCodePoint) return Error("\\u{...} is beyond U+10FFFF");
      }
      if (digits == 0) return Error("\\u{...} holds hex digits");
      ++pos_;
      return v;
    }
    absl::StatusOr<uint32_t> v = Hex(4);
    if (!v.ok()) return v.status();
    if (*v >= 0xd800 && *v <= 0xdbff && Peek() == '\\' && Peek(1) == 'u') {
      const size_t at = pos_;
      pos_ += 2;
      absl::StatusOr<uint32_t> low = Hex(4);
      if (low.ok() && *low >= 0xdc00 && *low <= 0xdfff) {
        return 0x10000 + ((*v - 0xd800) << 10) + (*low - 0xdc00);
      }
      pos_ = at;
    }
    return v;
  }

  // An escape at '\'. A single code point also sets *single (when given); classes (\d ...) not.
  absl::StatusOr<Ranges> Escape(bool in_class, bool* single) {
    ++pos_;
    if (AtEnd()) return Error("\\ at the end of the pattern");
    const char c = Peek();
    ++pos_;
    if (single != nullptr) *single = false;
    switch (c) {
      case 'd':
        return Digits();
      case 'D':
        return Complement(Digits());
      case 'w':
        return WordCharacters();
      case 'W':
        return Complement(WordCharacters());
      case 's':
        return Spaces();
      case 'S':
        return Complement(Spaces());
      case 'b':
      case 'B':
        if (c == 'b' && in_class) return Single(0x08, single);
        --pos_;
        return Error("word boundaries (\\b, \\B) are not supported");
      case 't':
        return Single('\t', single);
      case 'n':
        return Single('\n', single);
      case 'r':
        return Single('\r', single);
      case 'f':
        return Single('\f', single);
      case 'v':
        return Single('\v', single);
      case '0':
        if (Peek() >= '0' && Peek() <= '9') return Error("octal escapes are not supported");
        return Single(0, single);
      case 'x': {
        absl::StatusOr<uint32_t> v = Hex(2);
        if (!v.ok()) return v.status();
        return Single(*v, single);
      }
      case 'u': {
        absl::StatusOr<uint32_t> v = UnicodeEscape();
        if (!v.ok()) return v.status();
        return Single(*v, single);
      }
      case 'c':
        --pos_;
        return Error("control escapes (\\cX) are not supported");
      case 'k':
        --pos_;
        return Error("backreferences are not supported");
      case 'p':
      case 'P':
        --pos_;
        return Error("Unicode property escapes (\\p{...}) are not supported");
      case '-':
        if (in_class) return Single('-', single);
        break;
      default:
        if (c >= '1' && c <= '9') {
          --pos_;
          return Error("backreferences are not supported");
        }
        if (IsSyntaxCharacter(c)) return Single(static_cast<uint8_t>(c), single);
        break;
    }
    --pos_;
    return Error(absl::StrCat("\\", std::string(1, c), " is not an escape the u flag allows"));
  }

  static Ranges Single(uint32_t cp, bool* single) {
    if (single != nullptr) *single = true;
    return {{cp, cp}};
  }

  absl::StatusOr<RegexNode> Class() {
    const size_t open = pos_;
    ++pos_;  // '['
    const bool negate = Peek() == '^';
    if (negate) ++pos_;
    Ranges set;
    while (true) {
      if (AtEnd()) {
        pos_ = open;
        return Error("unterminated [");
      }
      if (Peek() == ']') break;
      bool single = false;
      absl::StatusOr<Ranges> lo = ClassAtom(&single);
      if (!lo.ok()) return lo.status();
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        bool single_hi = false;
        absl::StatusOr<Ranges> hi = ClassAtom(&single_hi);
        if (!hi.ok()) return hi.status();
        if (!single || !single_hi)
          return Error("a class range cannot start or end at \\d, \\w or \\s");
        if ((*lo)[0].first > (*hi)[0].first) return Error("a class range is out of order");
        set.push_back({(*lo)[0].first, (*hi)[0].first});
        continue;
      }
      set.insert(set.end(), lo->begin(), lo->end());
    }
    ++pos_;  // ']'
    set = Normalize(std::move(set));
    return RegexNode::Set(negate ? Complement(set) : set);
  }

  absl::StatusOr<Ranges> ClassAtom(bool* single) {
    if (Peek() == '\\') return Escape(/*in_class=*/true, single);
    absl::StatusOr<uint32_t> cp = CodePoint();
    if (!cp.ok()) return cp.status();
    *single = true;
    return Ranges{{*cp, *cp}};
  }

  absl::string_view p_;
  size_t pos_ = 0;
};
}  // namespace

RegexNode RegexNode::Set(CodePointRanges set) {
  RegexNode n;
  n.kind = Kind::kSet;
  n.set = WithoutSurrogates(set);  // UTF-8 cannot encode them, so no valid text holds them
  return n;
}

absl::StatusOr<std::vector<RegexBranch>> ParseRegex(absl::string_view pattern) {
  return Parser(pattern).Parse();
}

}  // namespace yoco
