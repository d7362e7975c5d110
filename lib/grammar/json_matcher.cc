// The matcher's readings step one byte at a time; a value that ends pops its frame, and a number
// (which ends only when a byte that is not part of it comes) hands that byte to its parent.
#include "lib/grammar/json_matcher.h"

#include <algorithm>
#include <string>
#include <utility>

namespace yoco {
namespace {

using Kind = SchemaNode::Kind;
using Frame = JsonMatcher::Frame;
using Reading = JsonMatcher::Reading;

constexpr size_t kMaxDepth = 64;  // frames in one reading (nesting of any-JSON values)
constexpr int32_t kMaxNumberChars = 24;
constexpr int32_t kMaxIntegerChars = 19;  // '-' and 18 digits
constexpr size_t kMaxReadings = 256;      // beyond: the schema is too ambiguous to follow

enum State : uint8_t {
  kStart = 0,
  // Objects.
  kObjAfterOpen,   // after '{'
  kObjKey,         // in property a's key, at byte b
  kObjOpenKey,     // an open object's key (a string frame above)
  kObjAfterKey,    // ':' next
  kObjColon,       // the value next
  kObjValue,       // in the value (a frame above)
  kObjAfterValue,  // ',' or '}' next
  kObjAfterComma,  // a key next
  // Arrays.
  kArrAfterOpen,
  kArrValue,
  kArrAfterValue,
  kArrAfterComma,
  // Strings.
  kStrBody,
  kStrUtf8,    // b more continuation bytes, the next in [c >> 8, c & 0xff]
  kStrEscape,  // after '\'
  kStrHex,     // b hex digits of \u seen; c: the first was 'd'
  // Strings with a pattern: a, b, c are the pattern's cursor after the decoded text so far.
  kPatBody,
  kPatEscape,  // after '\' (no \u: every character such a string needs is written otherwise)
  // Numbers.
  kNumMinus,
  kNumZero,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumE,
  kNumESign,
  kNumExp,
  // Literals (enum, const, true, false, null).
  kLiteral,  // literal a, at byte b
};

// The nodes an any-JSON value becomes at its first byte: an open object, an array of anything,
// a number, a boolean, null (strings are JsonSchema::AnyString).
const SchemaNode* AnyNode(Kind kind) {
  static const auto* nodes = [] {
    auto* made = new std::vector<SchemaNode>(static_cast<size_t>(Kind::kAnyOf) + 1);
    for (size_t k = 0; k < made->size(); ++k) (*made)[k].kind = static_cast<Kind>(k);
    (*made)[static_cast<size_t>(Kind::kObject)].open = true;
    (*made)[static_cast<size_t>(Kind::kArray)].items = JsonSchema::AnyValue();
    return made;
  }();
  return &(*nodes)[static_cast<size_t>(kind)];
}

const std::vector<std::string>& LiteralsOf(const SchemaNode* node) {
  static const std::vector<std::string> booleans = {"true", "false"};
  static const std::vector<std::string> null = {"null"};
  if (node->kind == Kind::kBoolean) return booleans;
  if (node->kind == Kind::kNull) return null;
  return node->literals;
}

bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }

// One more of a count bounded by [min, max]: past min, an unbounded count stops counting, so
// the states of long strings and arrays repeat (and their token masks can be reused).
int32_t Counted(int32_t count, int64_t min, int64_t max) {
  return max >= 0 || count < min ? count + 1 : count;
}

// The byte an escape in a patterned string stands for (-1: none it may use).
int Unescaped(uint8_t c) {
  switch (c) {
    case '"':
    case '\\':
    case '/':
      return c;
    case 'b':
      return 0x08;
    case 'f':
      return 0x0c;
    case 'n':
      return 0x0a;
    case 'r':
      return 0x0d;
    case 't':
      return 0x09;
    default:
      return -1;
  }
}

CharDfa::Cursor CursorOf(const Frame& f) { return {f.a, f.b, f.c}; }
void SetCursor(Frame& f, const CharDfa::Cursor& c) {
  f.a = c.state, f.b = c.pending, f.c = c.partial;
}

// Whether some escape continues a patterned string at `c` (else a '\' would strand it).
bool EscapeContinues(const CharDfa& dfa, const CharDfa::Cursor& c) {
  for (uint8_t e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) {
    CharDfa::Cursor next = c;
    if (dfa.Step(&next, static_cast<uint8_t>(Unescaped(e)))) return true;
  }
  return false;
}

bool IsHex(uint8_t c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The property candidates a key may start at: from `next` up to the first required one.
template <typename F>
void ForCandidates(const SchemaNode* node, int32_t next, F f) {
  for (int32_t j = next; j < static_cast<int32_t>(node->properties.size()); ++j) {
    f(j);
    if (node->properties[j].required) break;
  }
}

bool RequiredFrom(const SchemaNode* node, int32_t next) {
  for (int32_t j = next; j < static_cast<int32_t>(node->properties.size()); ++j) {
    if (node->properties[j].required) return true;
  }
  return false;
}

// A byte inside a string that is not its closing quote: it moves only the string's own frame,
// so it needs no copy of the reading (most of a mask's walk is such bytes). False: refused.
bool StringChar(Frame& f, uint8_t c) {
  const SchemaNode* node = f.node;
  switch (f.state) {
    case kStrBody:
      if (node->max_length >= 0 && f.a >= node->max_length) return false;
      if (c < 0x20) return false;
      f.a = Counted(f.a, node->min_length, node->max_length);  // a character starts
      if (c == '\\') {
        f.state = kStrEscape;
      } else if (c >= 0x80) {
        // UTF-8 as RFC 3629 has it: no overlong forms, no surrogates, nothing past U+10FFFF.
        if (c >= 0xc2 && c <= 0xdf) {
          f.b = 1, f.c = 0x80bf;
        } else if (c == 0xe0) {
          f.b = 2, f.c = 0xa0bf;
        } else if (c == 0xed) {
          f.b = 2, f.c = 0x809f;
        } else if (c >= 0xe1 && c <= 0xef) {
          f.b = 2, f.c = 0x80bf;
        } else if (c == 0xf0) {
          f.b = 3, f.c = 0x90bf;
        } else if (c >= 0xf1 && c <= 0xf3) {
          f.b = 3, f.c = 0x80bf;
        } else if (c == 0xf4) {
          f.b = 3, f.c = 0x808f;
        } else {
          return false;
        }
        f.state = kStrUtf8;
      }
      return true;
    case kStrUtf8:
      if (c < (f.c >> 8) || c > (f.c & 0xff)) return false;
      f.c = 0x80bf;
      if (--f.b == 0) f.state = kStrBody;
      return true;
    case kPatBody: {
      const CharDfa& dfa = *node->pattern;
      CharDfa::Cursor cursor = CursorOf(f);
      if (c == '\\') {
        if (cursor.pending != 0 || !EscapeContinues(dfa, cursor)) return false;
        f.state = kPatEscape;
        return true;
      }
      if (c < 0x20 || !dfa.Step(&cursor, c)) return false;
      SetCursor(f, cursor);
      return true;
    }
    default:
      return false;
  }
}

class Stepper {
 public:
  explicit Stepper(std::vector<Reading>& out) : out_(out) {}

  // Feeds byte `c` to reading `r`, adding what survives to the output.
  void Step(Reading r, uint8_t c) {
    if (r.empty()) return;  // a whole value: nothing may follow
    Frame& f = r.back();
    const SchemaNode* node = f.node;
    switch (f.state) {
      case kStart:
        return Start(std::move(r), c);
      case kObjAfterOpen:
      case kObjAfterComma:
        if (c == '}' && f.state == kObjAfterOpen && (node->open || !RequiredFrom(node, 0))) {
          return Pop(std::move(r));
        }
        if (c != '"') return;
        if (node->open) {
          f.state = kObjOpenKey;
          r.push_back({JsonSchema::AnyString(), kStrBody});
          return Keep(std::move(r));
        }
        ForCandidates(node, f.a, [&](int32_t j) {
          Reading k = r;
          k.back().state = kObjKey;
          k.back().a = j;
          k.back().b = 1;
          Keep(std::move(k));
        });
        return;
      case kObjKey: {
        const std::string& key = node->properties[f.a].key_json;
        if (c != static_cast<uint8_t>(key[f.b])) return;
        if (++f.b == static_cast<int32_t>(key.size())) f.state = kObjAfterKey;
        return Keep(std::move(r));
      }
      case kObjAfterKey:
        if (c != ':') return;
        f.state = kObjColon;
        return Keep(std::move(r));
      case kObjColon: {
        f.state = kObjValue;
        const SchemaNode* value = node->open ? JsonSchema::AnyValue() : node->properties[f.a].value;
        return Begin(std::move(r), value, c);
      }
      case kObjAfterValue:
        if (c == '}' && (node->open || !RequiredFrom(node, f.a))) return Pop(std::move(r));
        if (c == ',' && (node->open || f.a < static_cast<int32_t>(node->properties.size()))) {
          f.state = kObjAfterComma;
          return Keep(std::move(r));
        }
        return;
      case kArrAfterOpen:
        if (c == ']' && node->min_items == 0) return Pop(std::move(r));
        if (node->max_items == 0) return;
        f.state = kArrValue;
        return Begin(std::move(r), node->items, c);
      case kArrAfterValue:
        if (c == ']' && f.a >= node->min_items) return Pop(std::move(r));
        if (c == ',' && (node->max_items < 0 || f.a < node->max_items)) {
          f.state = kArrAfterComma;
          return Keep(std::move(r));
        }
        return;
      case kArrAfterComma:
        f.state = kArrValue;
        return Begin(std::move(r), node->items, c);
      case kStrBody:
        return StringByte(std::move(r), c);
      case kStrUtf8:
        if (StringChar(f, c)) Keep(std::move(r));
        return;
      case kStrEscape:
        if (c == 'u') {
          f.state = kStrHex;
          f.b = 0;
          f.c = 0;
          return Keep(std::move(r));
        }
        if (std::string("\"\\/bfnrt").find(static_cast<char>(c)) == std::string::npos) return;
        f.state = kStrBody;
        return Keep(std::move(r));
      case kStrHex:
        if (!IsHex(c)) return;
        // \uD800-\uDFFF are halves of a pair, which schemas count as one character: refused.
        if (f.b == 0) f.c = (c == 'd' || c == 'D');
        if (f.b == 1 && f.c == 1 && (c >= '8' || !IsDigit(c))) return;  // 8-9, a-f, A-F
        if (++f.b == 4) f.state = kStrBody;
        return Keep(std::move(r));
      case kPatBody:
        if (c == '"') {
          if (node->pattern->Accepting(CursorOf(f))) Pop(std::move(r));
          return;
        }
        if (StringChar(f, c)) Keep(std::move(r));
        return;
      case kPatEscape: {
        const int byte = Unescaped(c);
        CharDfa::Cursor cursor = CursorOf(f);
        if (byte < 0 || !node->pattern->Step(&cursor, static_cast<uint8_t>(byte))) return;
        SetCursor(f, cursor);
        f.state = kPatBody;
        return Keep(std::move(r));
      }
      case kNumMinus:
        if (c == '0') return Number(std::move(r), kNumZero);
        if (IsDigit(c)) return Number(std::move(r), kNumInt);
        return;
      case kNumZero:
      case kNumInt:
      case kNumFrac:
      case kNumExp:
        if (IsDigit(c) && f.state != kNumZero)
          return Number(std::move(r), static_cast<State>(f.state));
        if (node->kind != Kind::kInteger) {
          if (c == '.' && (f.state == kNumZero || f.state == kNumInt)) {
            return Number(std::move(r), kNumDot);
          }
          if ((c == 'e' || c == 'E') && f.state != kNumExp) return Number(std::move(r), kNumE);
        }
        // The number ended before this byte, which belongs to whatever follows it.
        r.pop_back();
        if (r.empty()) return;
        Resume(r);
        return Step(std::move(r), c);
      case kNumDot:
        if (IsDigit(c)) return Number(std::move(r), kNumFrac);
        return;
      case kNumE:
        if (c == '+' || c == '-') return Number(std::move(r), kNumESign);
        if (IsDigit(c)) return Number(std::move(r), kNumExp);
        return;
      case kNumESign:
        if (IsDigit(c)) return Number(std::move(r), kNumExp);
        return;
      case kLiteral: {
        const std::string& literal = LiteralsOf(node)[f.a];
        if (c != static_cast<uint8_t>(literal[f.b])) return;
        if (++f.b == static_cast<int32_t>(literal.size())) return Pop(std::move(r));
        return Keep(std::move(r));
      }
    }
  }

 private:
  void Keep(Reading r) {
    if (r.size() <= kMaxDepth) out_.push_back(std::move(r));
  }

  // The value on top ended: its parent goes on.
  void Pop(Reading r) {
    r.pop_back();
    if (!r.empty()) Resume(r);
    Keep(std::move(r));
  }

  static void Resume(Reading& r) {
    Frame& parent = r.back();
    switch (parent.state) {
      case kObjValue:
        parent.state = kObjAfterValue;
        parent.a += 1;  // the next property that may come
        break;
      case kObjOpenKey:
        parent.state = kObjAfterKey;
        break;
      case kArrValue:
        parent.state = kArrAfterValue;
        parent.a = Counted(parent.a, parent.node->min_items, parent.node->max_items);
        break;
      default:
        break;
    }
  }

  // A new value of `node` whose first byte is `c`.
  void Begin(Reading r, const SchemaNode* node, uint8_t c) {
    r.push_back({node, kStart});
    Step(std::move(r), c);
  }

  void Start(Reading r, uint8_t c) {
    Frame& f = r.back();
    const SchemaNode* node = f.node;
    switch (node->kind) {
      case Kind::kAny: {
        const SchemaNode* as = nullptr;
        if (c == '{') as = AnyNode(Kind::kObject);
        if (c == '[') as = AnyNode(Kind::kArray);
        if (c == '"') as = JsonSchema::AnyString();
        if (c == '-' || IsDigit(c)) as = AnyNode(Kind::kNumber);
        if (c == 't' || c == 'f') as = AnyNode(Kind::kBoolean);
        if (c == 'n') as = AnyNode(Kind::kNull);
        if (as == nullptr) return;
        f.node = as;
        return Start(std::move(r), c);
      }
      case Kind::kAnyOf:
        for (const SchemaNode* alt : node->alternatives) {
          Reading a = r;
          a.back().node = alt;
          Start(std::move(a), c);
        }
        return;
      case Kind::kObject:
        if (c != '{') return;
        f.state = kObjAfterOpen;
        return Keep(std::move(r));
      case Kind::kArray:
        if (c != '[') return;
        f.state = kArrAfterOpen;
        return Keep(std::move(r));
      case Kind::kString:
        if (c != '"') return;
        f.state = node->pattern ? kPatBody : kStrBody;
        if (node->pattern) SetCursor(f, node->pattern->Start());
        return Keep(std::move(r));
      case Kind::kInteger:
      case Kind::kNumber:
        if (c == '-') return Number(std::move(r), kNumMinus);
        if (c == '0') return Number(std::move(r), kNumZero);
        if (IsDigit(c)) return Number(std::move(r), kNumInt);
        return;
      case Kind::kBoolean:
      case Kind::kNull:
      case Kind::kLiterals: {
        const std::vector<std::string>& literals = LiteralsOf(node);
        for (size_t i = 0; i < literals.size(); ++i) {
          if (static_cast<uint8_t>(literals[i][0]) != c) continue;
          Reading l = r;
          l.back().state = kLiteral;
          l.back().a = static_cast<int32_t>(i);
          l.back().b = 1;
          if (literals[i].size() == 1) {
            Pop(std::move(l));
          } else {
            Keep(std::move(l));
          }
        }
        return;
      }
    }
  }

  // Bounds that every JSON reader takes exactly: integers fit int64 (18 digits), exponents have
  // at most 2 digits (so no number overflows a double).
  void Number(Reading r, State next) {
    Frame& f = r.back();
    const int32_t most = f.node->kind == Kind::kInteger ? kMaxIntegerChars : kMaxNumberChars;
    if (++f.a > most) return;
    if (next == kNumExp && ++f.b > 2) return;
    // A state that needs a digit more needs room for it (else the text could not end).
    const bool needs_digit =
        next == kNumMinus || next == kNumDot || next == kNumE || next == kNumESign;
    if (needs_digit && f.a >= most) return;
    f.state = next;
    Keep(std::move(r));
  }

  void StringByte(Reading r, uint8_t c) {
    Frame& f = r.back();
    if (c == '"') {
      if (f.a >= f.node->min_length) Pop(std::move(r));
      return;
    }
    if (StringChar(f, c)) Keep(std::move(r));
  }

  std::vector<Reading>& out_;
};

bool Accepting(const Reading& r) {
  if (r.empty()) return true;
  if (r.size() != 1) return false;
  const uint8_t s = r.back().state;
  return s == kNumZero || s == kNumInt || s == kNumFrac || s == kNumExp;
}

}  // namespace

JsonMatcher::JsonMatcher(const SchemaNode* node) { readings_.push_back({Frame{node, kStart}}); }

bool JsonMatcher::Advance(absl::string_view bytes) {
  // One reading inside a string: the byte moves its top frame alone, in place.
  if (bytes.size() == 1 && readings_.size() == 1 && !readings_[0].empty()) {
    Frame& top = readings_[0].back();
    const uint8_t c = static_cast<uint8_t>(bytes[0]);
    const bool in_string = top.state == kStrBody || top.state == kPatBody || top.state == kStrUtf8;
    if (in_string && (c != '"' || top.state == kStrUtf8)) {
      const Frame was = top;
      if (StringChar(top, c)) return true;
      top = was;
      return false;
    }
  }
  std::vector<Reading> current = readings_, next;
  for (char byte : bytes) {
    next.clear();
    Stepper stepper(next);
    for (Reading& r : current) stepper.Step(std::move(r), static_cast<uint8_t>(byte));
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    if (next.empty() || next.size() > kMaxReadings) return false;
    current.swap(next);
  }
  readings_ = std::move(current);
  return true;
}

bool JsonMatcher::Complete() const {
  return std::any_of(readings_.begin(), readings_.end(), Accepting);
}

bool JsonMatcher::MustEnd() const {
  return std::all_of(readings_.begin(), readings_.end(),
                     [](const Reading& r) { return r.empty(); });
}

}  // namespace yoco
