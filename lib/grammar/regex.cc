// A pattern is parsed into a tree of code-point sets, sequences, alternatives and repeats, built
// into a Thompson NFA over code-point ranges, and determinised by subset construction over the
// classes of code points every range treats alike — with the code-point count (for length
// bounds) as part of each state — then trimmed of every state from which no accepting one can
// be reached.
#include "lib/grammar/regex.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10ffff;
constexpr int kMaxRepeat = 1000;      // n and m of {n,m}
constexpr int kMaxGroupDepth = 32;    // nested groups
constexpr int kMaxNfaStates = 50000;  // beyond: the pattern is too large to compile quickly
constexpr size_t kMaxDfaMoves = size_t{1} << 20;  // states x classes: 4 MB at most
// NFA states visited while determinising: bounds the compile time (~0.1 s) whatever the pattern,
// since routers compile what clients send.
constexpr int64_t kMaxWork = 30'000'000;

// Sorted, disjoint, non-adjacent code-point ranges.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

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

// UTF-8 cannot encode the surrogates, so no valid text holds them.
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

struct Node {
  enum class Kind { kSet, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;  // with no children: the empty text
  Ranges set;
  std::vector<Node> children;
  int min = 0;
  int max = -1;  // -1: unbounded
};

Node SetNode(Ranges set) {
  Node n;
  n.kind = Node::Kind::kSet;
  n.set = std::move(set);
  return n;
}

// A top-level alternative of the pattern, with its anchors.
struct Branch {
  Node node;
  bool anchored_start = false;
  bool anchored_end = false;
};

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

  absl::StatusOr<std::vector<Branch>> Parse() {
    std::vector<Branch> branches;
    while (true) {
      Branch b;
      absl::StatusOr<Node> seq = Sequence(0, &b);
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
  absl::StatusOr<Node> Sequence(int depth, Branch* top) {
    Node seq;
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
      absl::StatusOr<Node> atom = Atom(depth);
      if (!atom.ok()) return atom.status();
      absl::StatusOr<Node> term = Quantified(*std::move(atom));
      if (!term.ok()) return term.status();
      seq.children.push_back(*std::move(term));
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  absl::StatusOr<Node> Group(int depth) {
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
    Node alt;
    alt.kind = Node::Kind::kAlt;
    while (true) {
      absl::StatusOr<Node> seq = Sequence(depth + 1, nullptr);
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

  absl::StatusOr<Node> Atom(int depth) {
    switch (Peek()) {
      case '(':
        return Group(depth);
      case '[':
        return Class();
      case '.':
        ++pos_;
        return SetNode(Complement(LineTerminators()));
      case '\\': {
        absl::StatusOr<Ranges> set = Escape(/*in_class=*/false, nullptr);
        if (!set.ok()) return set.status();
        return SetNode(*std::move(set));
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
        return SetNode({{*cp, *cp}});
      }
    }
  }

  absl::StatusOr<Node> Quantified(Node atom) {
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
    Node repeat;
    repeat.kind = Node::Kind::kRepeat;
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

  absl::StatusOr<Node> Class() {
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
    return SetNode(negate ? Complement(set) : set);
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

// A Thompson NFA: each state has epsilon moves and at most one move on a code-point range.
struct NfaState {
  std::vector<int32_t> epsilon;
  int32_t next = -1;
  uint32_t lo = 0;
  uint32_t hi = 0;
};

struct Fragment {
  int32_t in;
  int32_t out;  // no moves yet: the caller links it on
};

class NfaBuilder {
 public:
  std::vector<NfaState> states;
  bool too_large = false;

  int32_t New() {
    if (states.size() >= kMaxNfaStates) {
      too_large = true;
      return 0;  // the build goes on harmlessly; its result is refused
    }
    states.emplace_back();
    return static_cast<int32_t>(states.size()) - 1;
  }
  void Link(int32_t from, int32_t to) {
    if (!too_large) states[from].epsilon.push_back(to);
  }

  Fragment Build(const Node& n) {
    if (too_large) return {0, 0};
    switch (n.kind) {
      case Node::Kind::kSet:
        return Set(n.set);
      case Node::Kind::kConcat: {
        const int32_t in = New();
        int32_t out = in;
        for (const Node& child : n.children) {
          const Fragment f = Build(child);
          Link(out, f.in);
          out = f.out;
        }
        return {in, out};
      }
      case Node::Kind::kAlt: {
        const int32_t in = New(), out = New();
        for (const Node& child : n.children) {
          const Fragment f = Build(child);
          Link(in, f.in);
          Link(f.out, out);
        }
        return {in, out};
      }
      case Node::Kind::kRepeat: {
        const Node& child = n.children[0];
        const int32_t in = New();
        int32_t at = in;
        for (int i = 0; i < n.min; ++i) {
          const Fragment f = Build(child);
          Link(at, f.in);
          at = f.out;
        }
        if (n.max < 0) {
          const int32_t loop = New();
          const Fragment f = Build(child);
          Link(at, loop);
          Link(loop, f.in);
          Link(f.out, loop);
          return {in, loop};
        }
        const int32_t out = New();
        for (int i = n.min; i < n.max; ++i) {
          Link(at, out);  // this copy and the rest are optional
          const Fragment f = Build(child);
          Link(at, f.in);
          at = f.out;
        }
        Link(at, out);
        return {in, out};
      }
    }
    return {0, 0};
  }

 private:
  Fragment Set(const Ranges& set) {
    const int32_t in = New(), out = New();
    for (const auto& [lo, hi] : WithoutSurrogates(set)) {
      const int32_t at = New();
      if (too_large) break;
      Link(in, at);
      states[at].lo = lo;
      states[at].hi = hi;
      states[at].next = out;
    }
    return {in, out};
  }
};

}  // namespace

class RegexCompiler {
 public:
  RegexCompiler(const std::vector<NfaState>& nfa, int32_t accept, const RegexOptions& options)
      : nfa_(nfa), accept_(accept), options_(options) {}

  absl::StatusOr<CharDfa> Run(int32_t start) {
    CharDfa dfa;
    Classes(&dfa);
    const int classes = dfa.classes_;
    std::vector<std::pair<std::vector<int32_t>, int64_t>> states;
    absl::flat_hash_map<std::pair<std::vector<int32_t>, int64_t>, int32_t> ids;
    auto id_of = [&](std::vector<int32_t> set, int64_t count) -> int32_t {
      auto key = std::make_pair(std::move(set), count);
      auto it = ids.find(key);
      if (it != ids.end()) return it->second;
      const int32_t id = static_cast<int32_t>(states.size());
      ids.emplace(key, id);
      states.push_back(std::move(key));
      return id;
    };
    id_of(Closure({start}), 0);
    std::vector<int32_t> moved;
    for (size_t s = 0; s < states.size(); ++s) {
      if (states.size() > static_cast<size_t>(options_.max_states) ||
          states.size() * classes > kMaxDfaMoves) {
        return absl::InvalidArgumentError(
            absl::StrCat("the pattern needs more than ", states.size() - 1,
                         " automaton states (with its length bounds, if any)"));
      }
      if (work_ > kMaxWork) {
        return absl::InvalidArgumentError("the pattern is too complex to compile");
      }
      const int64_t count = states[s].second;
      dfa.next_.resize((s + 1) * classes, CharDfa::kDead);
      for (int k = 0; k < classes; ++k) {
        const uint32_t cp = dfa.class_starts_[k];  // it stands for its class
        if ((cp < 128 && !options_.ascii[cp]) || (cp >= 0xd800 && cp <= 0xdfff)) continue;
        moved.clear();
        work_ += static_cast<int64_t>(states[s].first.size());
        for (int32_t n : states[s].first) {
          const NfaState& st = nfa_[n];
          if (st.next >= 0 && cp >= st.lo && cp <= st.hi) moved.push_back(st.next);
        }
        if (moved.empty()) continue;
        int64_t next_count = count + 1;
        if (options_.max_chars >= 0 && next_count > options_.max_chars) continue;
        if (options_.max_chars < 0) next_count = std::min(next_count, options_.min_chars);
        const int32_t to = id_of(Closure(moved), next_count);
        dfa.next_[s * classes + k] = to;
      }
    }
    const size_t n = states.size();
    dfa.accepting_.assign(n, 0);
    for (size_t s = 0; s < n; ++s) {
      const auto& set = states[s].first;
      dfa.accepting_[s] = std::binary_search(set.begin(), set.end(), accept_) &&
                          states[s].second >= options_.min_chars;
    }
    // Trim: keep only moves into states from which an accepting one can be reached.
    std::vector<std::vector<int32_t>> into(n);
    for (size_t s = 0; s < n; ++s) {
      for (int k = 0; k < classes; ++k) {
        const int32_t to = dfa.next_[s * classes + k];
        if (to != CharDfa::kDead) into[to].push_back(static_cast<int32_t>(s));
      }
    }
    std::vector<uint8_t> live(n, 0);
    std::vector<int32_t> work;
    for (size_t s = 0; s < n; ++s) {
      if (dfa.accepting_[s]) live[s] = 1, work.push_back(static_cast<int32_t>(s));
    }
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      for (int32_t from : into[s]) {
        if (!live[from]) live[from] = 1, work.push_back(from);
      }
    }
    if (!live[0]) {
      return absl::InvalidArgumentError(options_.min_chars > 0 || options_.max_chars >= 0
                                            ? "no text matches the pattern within its length bounds"
                                            : "no text matches the pattern");
    }
    dfa.open_.assign(n, 0);
    dfa.live_.resize(n);
    for (size_t s = 0; s < n; ++s) {
      for (int k = 0; k < classes; ++k) {
        int32_t& to = dfa.next_[s * classes + k];
        if (to != CharDfa::kDead && !live[to]) to = CharDfa::kDead;
        if (to == CharDfa::kDead) continue;
        dfa.open_[s] = 1;
        const uint32_t lo = dfa.class_starts_[k];
        const uint32_t hi = k + 1 < classes ? dfa.class_starts_[k + 1] - 1 : kMaxCodePoint;
        auto& ranges = dfa.live_[s];
        if (!ranges.empty() && ranges.back().second + 1 == lo) {
          ranges.back().second = hi;
        } else {
          ranges.push_back({lo, hi});
        }
      }
    }
    return dfa;
  }

 private:
  // Code points that every move and the allowed ASCII treat alike share a class (surrogates one
  // of their own, never moved on): the table holds one column per class.
  void Classes(CharDfa* dfa) const {
    std::vector<uint32_t> starts = {0, 0xd800, 0xe000};
    for (const NfaState& st : nfa_) {
      if (st.next < 0) continue;
      starts.push_back(st.lo);
      if (st.hi < kMaxCodePoint) starts.push_back(st.hi + 1);
    }
    for (uint32_t c = 1; c < 128; ++c) {
      if (options_.ascii[c] != options_.ascii[c - 1]) starts.push_back(c);
    }
    starts.push_back(128);
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    dfa->class_starts_ = starts;
    dfa->classes_ = static_cast<int32_t>(starts.size());
    for (uint32_t c = 0; c < 128; ++c) {
      dfa->ascii_class_[c] = static_cast<uint8_t>(
          std::upper_bound(starts.begin(), starts.end(), c) - starts.begin() - 1);
    }
  }

  // The states reachable from `seeds` by epsilon moves that matter to the future: those with a
  // byte move, and the accepting one. Sorted.
  std::vector<int32_t> Closure(const std::vector<int32_t>& seeds) {
    ++epoch_;
    if (seen_.size() < nfa_.size()) seen_.resize(nfa_.size(), 0);
    std::vector<int32_t> stack = seeds, out;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (seen_[s] == epoch_) continue;
      seen_[s] = epoch_;
      ++work_;
      if (nfa_[s].next >= 0 || s == accept_) out.push_back(s);
      for (int32_t e : nfa_[s].epsilon) {
        if (seen_[e] != epoch_) stack.push_back(e);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  const std::vector<NfaState>& nfa_;
  int32_t accept_;
  const RegexOptions& options_;
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  int64_t work_ = 0;
};

absl::StatusOr<CharDfa> CompileRegex(absl::string_view pattern, const RegexOptions& options) {
  absl::StatusOr<std::vector<Branch>> branches = Parser(pattern).Parse();
  if (!branches.ok()) return branches.status();
  NfaBuilder nfa;
  const int32_t start = nfa.New(), accept = nfa.New();
  Node anything;  // what a search may skip before and after its match
  anything.kind = Node::Kind::kRepeat;
  anything.children.push_back(SetNode({{0, kMaxCodePoint}}));
  for (const Branch& b : *branches) {
    Fragment f = nfa.Build(b.node);
    if (options.search && !b.anchored_start) {
      const Fragment before = nfa.Build(anything);
      nfa.Link(before.out, f.in);
      f.in = before.in;
    }
    if (options.search && !b.anchored_end) {
      const Fragment after = nfa.Build(anything);
      nfa.Link(f.out, after.in);
      f.out = after.out;
    }
    nfa.Link(start, f.in);
    nfa.Link(f.out, accept);
  }
  if (nfa.too_large) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pattern is too large (more than ", kMaxNfaStates, " automaton states)"));
  }
  return RegexCompiler(nfa.states, accept, options).Run(start);
}

}  // namespace yoco
