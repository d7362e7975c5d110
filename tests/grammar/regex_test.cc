// CompileRegex against std::regex (an independent ECMAScript engine) on random patterns and
// texts, its byte stepping against a reference UTF-8 decoder, its refusals by name, and the
// promise constrained decoding relies on: no state it reaches is a dead end.
#include "lib/grammar/regex.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

namespace yoco {
namespace {

bool Continues(const CharDfa& dfa, const std::string& text) {
  CharDfa::Cursor c = dfa.Start();
  return dfa.Walk(&c, text);
}

bool Matches(const CharDfa& dfa, const std::string& text) {
  CharDfa::Cursor c = dfa.Start();
  return dfa.Walk(&c, text) && dfa.Accepting(c);
}

// RFC 3629's well-formed UTF-8, decoded the long way: the code point, or -1.
int64_t DecodeOne(const std::vector<uint8_t>& b) {
  const size_t n = b.size();
  if (n == 0) return -1;
  const size_t want = b[0] < 0x80         ? 1
                      : (b[0] >> 5) == 6  ? 2
                      : (b[0] >> 4) == 14 ? 3
                      : (b[0] >> 3) == 30 ? 4
                                          : 0;
  if (want != n) return -1;
  int64_t cp = n == 1 ? b[0] : n == 2 ? b[0] & 31 : n == 3 ? b[0] & 15 : b[0] & 7;
  for (size_t i = 1; i < n; ++i) {
    if ((b[i] >> 6) != 2) return -1;
    cp = cp * 64 + (b[i] & 63);
  }
  const int64_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  return cp;
}

TEST(CharDfaTest, OneCharacterIsExactlyOneWellFormedUtf8Sequence) {
  absl::StatusOr<CharDfa> dfa = CompileRegex("[^b-y\\u0800-\\u0fff\\u{10000}]");
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  auto in_class = [](int64_t cp) {
    return !(cp >= 'b' && cp <= 'y') && !(cp >= 0x800 && cp <= 0xfff) && cp != 0x10000;
  };
  std::mt19937 rng(5);
  int accepted = 0;
  auto check = [&](const std::vector<uint8_t>& bytes) {
    const std::string text(bytes.begin(), bytes.end());
    const int64_t cp = DecodeOne(bytes);
    const bool want = cp >= 0 && in_class(cp);
    ASSERT_EQ(Matches(*dfa, text), want) << std::hex << cp;
    accepted += want;
    // A refused sequence is refused at its first byte that no character of the class can follow.
    if (!want && Continues(*dfa, text)) {
      ASSERT_TRUE(cp >= 0 || bytes.size() < 4) << "a whole malformed sequence taken";
    }
  };
  for (int b0 = 0; b0 < 256; ++b0) {
    check({static_cast<uint8_t>(b0)});
    for (int b1 = 0; b1 < 256; ++b1) {
      check({static_cast<uint8_t>(b0), static_cast<uint8_t>(b1)});
      for (int b2 : {0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0x41}) {
        check({static_cast<uint8_t>(b0), static_cast<uint8_t>(b1), static_cast<uint8_t>(b2)});
      }
    }
  }
  for (int i = 0; i < 200000; ++i) {
    const uint32_t cp = rng() % 0x110000;
    std::vector<uint8_t> bytes;
    if (cp < 0x80) {
      bytes = {static_cast<uint8_t>(cp)};
    } else if (cp < 0x800) {
      bytes = {static_cast<uint8_t>(0xc0 | cp >> 6), static_cast<uint8_t>(0x80 | (cp & 63))};
    } else if (cp < 0x10000) {
      bytes = {static_cast<uint8_t>(0xe0 | cp >> 12), static_cast<uint8_t>(0x80 | (cp >> 6 & 63)),
               static_cast<uint8_t>(0x80 | (cp & 63))};
    } else {
      bytes = {static_cast<uint8_t>(0xf0 | cp >> 18), static_cast<uint8_t>(0x80 | (cp >> 12 & 63)),
               static_cast<uint8_t>(0x80 | (cp >> 6 & 63)), static_cast<uint8_t>(0x80 | (cp & 63))};
    }
    if (i % 3 == 0) bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 << (rng() % 8));
    check(bytes);
  }
  EXPECT_GT(accepted, 100000);
}

// Code points that stand for every class the random patterns below can tell apart.
const uint32_t kSampleCodePoints[] = {'a', 'b', 'c', 'd', '1', '\n', '\r', ' ', 0xe9, 0x3000};

// A random pattern over a small alphabet, in the syntax std::regex and ours share.
std::string RandomPattern(std::mt19937& rng, int depth) {
  std::string out;
  const int terms = 1 + rng() % 3;
  for (int t = 0; t < terms; ++t) {
    std::string atom;
    switch (rng() % (depth > 2 ? 6 : 9)) {
      case 0:
      case 1:
      case 2:
        atom = std::string(1, "abc"[rng() % 3]);
        break;
      case 3:
        atom = "[ab]";
        break;
      case 4:
        atom = rng() % 2 ? "[^a]" : ".";
        break;
      case 5:
        atom = rng() % 2 ? "\\d" : "[a-c1]";
        break;
      case 6:
        atom = "(" + RandomPattern(rng, depth + 1) + "|" + RandomPattern(rng, depth + 1) + ")";
        break;
      case 7:
        atom = "(?:" + RandomPattern(rng, depth + 1) + ")";
        break;
      default:
        atom = "(" + RandomPattern(rng, depth + 1) + ")";
        break;
    }
    // Groups get bounded quantifiers only: std::regex backtracks, and a starred group of stars
    // takes it exponential time.
    const char* quantifiers[] = {"", "?", "{2}", "{1,3}", "", "*", "+", "{0,}", "*?"};
    out += atom + quantifiers[rng() % (atom[0] == '(' ? 4 : 9)];
  }
  return out;
}

std::string RandomText(std::mt19937& rng, int max_len) {
  std::string t;
  const int n = rng() % (max_len + 1);
  for (int i = 0; i < n; ++i) t += "abcd1\n"[rng() % 6];
  return t;
}

// Every state the DFA can be in can still reach acceptance.
bool ReachesAcceptance(const CharDfa& dfa, int32_t state) {
  std::vector<uint8_t> seen(dfa.size(), 0);
  std::vector<int32_t> work = {state};
  seen[state] = 1;
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    if (dfa.Accepting({s, 0, 0})) return true;
    for (uint32_t cp : kSampleCodePoints) {
      const int32_t to = dfa.Next(s, cp);
      if (to != CharDfa::kDead && !seen[to]) seen[to] = 1, work.push_back(to);
    }
  }
  return false;
}

TEST(RegexTest, RandomPatternsAgreeWithStdRegexAndNeverStrandAText) {
  std::mt19937 rng(11);
  int matched = 0, compared = 0, too_large = 0;
  for (int i = 0; i < 400; ++i) {
    const std::string pattern = RandomPattern(rng, 0);
    for (bool search : {false, true}) {
      RegexOptions options;
      options.search = search;
      absl::StatusOr<CharDfa> dfa = CompileRegex(pattern, options);
      if (!dfa.ok() && (dfa.status().message().find("automaton states") != std::string::npos ||
                        dfa.status().message().find("too complex") != std::string::npos)) {
        ++too_large;  // nested repeats of '.': a real blow-up, refused by design
        continue;
      }
      ASSERT_TRUE(dfa.ok()) << pattern << ": " << dfa.status();
      const std::regex reference(pattern, std::regex::ECMAScript);
      for (int k = 0; k < 40; ++k) {
        const std::string text = RandomText(rng, 8);
        const bool want =
            search ? std::regex_search(text, reference) : std::regex_match(text, reference);
        ASSERT_EQ(Matches(*dfa, text), want)
            << pattern << (search ? " (search)" : "") << " on \"" << text << "\"";
        matched += want;
        ++compared;
        CharDfa::Cursor c = dfa->Start();
        if (dfa->Walk(&c, text)) {
          ASSERT_TRUE(dfa->Accepting(c) || dfa->Open(c));
          ASSERT_TRUE(ReachesAcceptance(*dfa, c.state)) << pattern << " after \"" << text << "\"";
        } else {
          // Refused: no continuation matches either.
          for (int e = 0; e < 5; ++e) {
            const std::string longer = text + RandomText(rng, 4);
            ASSERT_FALSE(search ? std::regex_search(longer, reference)
                                : std::regex_match(longer, reference))
                << pattern << " on \"" << longer << "\"";
          }
        }
      }
    }
  }
  // The comparison means something only if both answers come up often.
  EXPECT_GT(matched, compared / 10);
  EXPECT_LT(matched, compared * 9 / 10);
  EXPECT_LT(too_large, 20);
}

TEST(RegexTest, CharactersAreCodePoints) {
  absl::StatusOr<CharDfa> one = CompileRegex("^.$");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(Matches(*one, "é"));
  EXPECT_TRUE(Matches(*one, "\xf0\x9f\x98\x80"));  // U+1F600
  EXPECT_FALSE(Matches(*one, "\n"));
  EXPECT_FALSE(Matches(*one, "\xe2\x80\xa8"));  // U+2028, a line terminator
  EXPECT_FALSE(Matches(*one, "ab"));
  EXPECT_TRUE(Continues(*one, "\xc3"));       // a lead byte: more to come
  EXPECT_FALSE(Continues(*one, "\xc0\x80"));  // overlong: not UTF-8
  EXPECT_FALSE(Continues(*one, "\xed\xa0"));  // a surrogate's start

  absl::StatusOr<CharDfa> greek = CompileRegex("[α-ω]+\\u{1F600}?[^a]");
  ASSERT_TRUE(greek.ok()) << greek.status();
  EXPECT_TRUE(Matches(*greek, "αβω€"));
  EXPECT_TRUE(Matches(*greek, "λ\xf0\x9f\x98\x80z"));
  EXPECT_FALSE(Matches(*greek, "αa"));
  EXPECT_FALSE(Matches(*greek, "Ωz"));  // capital omega is outside α-ω

  absl::StatusOr<CharDfa> space = CompileRegex("\\s\\S");
  ASSERT_TRUE(space.ok());
  EXPECT_TRUE(Matches(*space, "\xe3\x80\x80x"));          // U+3000 is white space
  EXPECT_FALSE(Matches(*space, "\xe3\x80\x80\xc2\xa0"));  // U+00A0 is too

  absl::StatusOr<CharDfa> pair = CompileRegex("\\uD83D\\uDE00");  // one code point, as u reads it
  ASSERT_TRUE(pair.ok());
  EXPECT_TRUE(Matches(*pair, "\xf0\x9f\x98\x80"));
}

TEST(RegexTest, LengthBoundsCountCodePointsAndJoinThePattern) {
  RegexOptions options;
  options.search = true;
  options.min_chars = 2;
  options.max_chars = 3;
  absl::StatusOr<CharDfa> dfa = CompileRegex("é", options);
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  EXPECT_FALSE(Matches(*dfa, "é"));
  EXPECT_TRUE(Matches(*dfa, "éé"));
  EXPECT_TRUE(Matches(*dfa, "xéy"));
  EXPECT_FALSE(Matches(*dfa, "xyz"));
  EXPECT_FALSE(Continues(*dfa, "xyz"));  // no room left for the é
  EXPECT_FALSE(Continues(*dfa, "éééé"));
  EXPECT_TRUE(Continues(*dfa, "x\xc3"));        // é's first byte
  EXPECT_TRUE(Continues(*dfa, "xy\xc3"));       // could still be "xyé"
  EXPECT_FALSE(Continues(*dfa, "xy\xc3\xa8"));  // "xyè": full, and no é

  options.min_chars = 2;
  options.max_chars = -1;
  absl::StatusOr<CharDfa> none = CompileRegex("^a$", options);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no text matches the pattern within its length bounds"),
            std::string::npos);

  // Allowed ASCII: a pattern that needs a refused character matches nothing.
  RegexOptions ascii;
  ascii.ascii.reset(0x01);
  EXPECT_FALSE(CompileRegex("\\x01", ascii).ok());
  absl::StatusOr<CharDfa> either = CompileRegex("\\x01|b", ascii);
  ASSERT_TRUE(either.ok());
  EXPECT_FALSE(Continues(*either, "\x01"));
}

TEST(RegexTest, UnsupportedSyntaxIsRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"a(?=b)", "lookahead"},
      {"(?<!a)b", "lookbehind"},
      {"(a)\\1", "backreferences"},
      {"\\bword", "word boundaries"},
      {"\\p{L}", "property escapes"},
      {"(?i)a", "flags are not supported"},
      {"a**", "nothing to repeat"},
      {"[z-a]", "out of order"},
      {"a{2000}", "above 1000"},
      {"a{", "a quantifier is"},
      {"x^y", "^ and $"},
      {"(a$)", "^ and $"},
      {"a$b", "$ is supported only"},
      {"(ab", "unterminated group"},
      {"ab)", "unmatched )"},
      {"[ab", "unterminated ["},
      {"\\q", "\\q is not an escape"},
      {"[\\d-z]", "cannot start or end"},
      {"\xff", "not valid UTF-8"},
      {"[ab]*a[ab]{20}", "automaton states"},
      {"}", "must be escaped"},
  };
  for (const auto& [pattern, says] : cases) {
    absl::StatusOr<CharDfa> dfa = CompileRegex(pattern);  // [ab]*a[ab]{20}: 2^21 states
    ASSERT_FALSE(dfa.ok()) << pattern;
    EXPECT_EQ(dfa.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(dfa.status().message().find(says), std::string::npos)
        << pattern << ": " << dfa.status().message();
  }
}

TEST(RegexTest, CompileWorkIsBoundedAndReported) {
  RegexOptions options;
  int64_t used = 0;
  options.work_used = &used;
  ASSERT_TRUE(CompileRegex("[ab]*a[ab]{9}", options).ok());
  EXPECT_GT(used, 1000);
  const int64_t whole = used;
  options.max_work = whole / 2;
  absl::StatusOr<CharDfa> cut = CompileRegex("[ab]*a[ab]{9}", options);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("too complex"), std::string::npos);
  EXPECT_LE(used, whole);
}

TEST(RegexTest, AnchorsOfTopLevelAlternativesAndNamedGroups) {
  RegexOptions search;
  search.search = true;
  absl::StatusOr<CharDfa> dfa = CompileRegex("^ab|cd$|(?<mid>xy)", search);
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  EXPECT_TRUE(Matches(*dfa, "abzz"));
  EXPECT_FALSE(Matches(*dfa, "zab"));
  EXPECT_TRUE(Matches(*dfa, "zzcd"));
  EXPECT_FALSE(Matches(*dfa, "cdz"));
  EXPECT_TRUE(Matches(*dfa, "zxyz"));
  absl::StatusOr<CharDfa> whole = CompileRegex("[0-9]{3}-[A-Z]\\.?");
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(Matches(*whole, "123-Q."));
  EXPECT_FALSE(Matches(*whole, "123-Q.x"));
  CharDfa::Cursor end = whole->Start();
  ASSERT_TRUE(whole->Walk(&end, "123-Q."));
  EXPECT_FALSE(whole->Open(end));  // then only the end
}

}  // namespace
}  // namespace yoco
