// JsonMatcher against a reference validator written from the JSON Schema text itself (not the
// compiled tree): every text the matcher takes whole parses and validates, texts a generator
// writes from the schema are taken byte by byte, and random walks over the bytes it allows end
// in valid documents. TokenVocabulary's masks equal feeding each token alone. Unsupported
// keywords are refused by name.
#include "lib/grammar/json_matcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/token_mask.h"
#include "nlohmann/json.hpp"
#include "tests/grammar/schema_reference.h"

namespace yoco {
namespace {

using json = nlohmann::json;
using testing::kSchemas;
using testing::Resolve;
using testing::Valid;

// Text a generator writes from the schema's own meaning (independent of the matcher): compact
// JSON, properties in the schema's order, optional ones sometimes left out.
json Generate(const json& root, const json& schema, std::mt19937& rng, int depth = 0) {
  const json& s = *Resolve(root, schema);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  if (s.contains("enum")) {  // the values its other keywords keep
    json kept = json::array();
    for (const json& v : s["enum"]) {
      if (Valid(root, s, v)) kept.push_back(v);
    }
    return kept[pick(kept.size())];
  }
  if (s.contains("const")) return s["const"];
  if (s.contains("anyOf")) return Generate(root, s["anyOf"][pick(s["anyOf"].size())], rng, depth);
  std::string type = "object";
  if (s.contains("type")) {
    type = s["type"].is_string() ? s["type"].get<std::string>()
                                 : s["type"][pick(s["type"].size())].get<std::string>();
  } else if (!s.contains("properties")) {
    type = std::vector<std::string>{"string", "integer", "null", "array"}[pick(depth > 2 ? 3 : 4)];
  }
  if (type == "object") {
    json out = json::object();
    const json props = s.value("properties", json::object());
    const json required = s.value("required", json::array());
    for (const auto& [k, v] : props.items()) {
      const bool must = std::find(required.begin(), required.end(), k) != required.end();
      if (must || rng() % 2) out[k] = Generate(root, v, rng, depth + 1);
    }
    if (props.empty() && depth < 2 && rng() % 2) out["k"] = Generate(root, json::object(), rng, 3);
    return out;
  }
  if (type == "array") {
    const size_t lo = s.value("minItems", 0), hi = s.value("maxItems", 3);
    json out = json::array();
    for (size_t n = lo + pick(hi - lo + 1); n > 0; --n) {
      out.push_back(Generate(root, s.value("items", json::object()), rng, depth + 1));
    }
    return out;
  }
  if (type == "string") {
    if (s.contains("pattern")) return s["examples"][pick(s["examples"].size())];
    const size_t lo = s.value("minLength", 0), hi = s.value("maxLength", 6);
    std::string out;
    const char* pieces[] = {"a", "Z", "\xc3\xa9", "\xe2\x82\xac", " ", "\"", "\\", "\n"};
    for (size_t n = lo + pick(hi - lo + 1); n > 0; --n) out += pieces[pick(8)];
    return out;
  }
  if (type == "integer") return static_cast<int64_t>(rng() % 2000) - 1000;
  if (type == "number") return static_cast<double>(static_cast<int>(rng() % 20000) - 10000) / 64;
  if (type == "boolean") return rng() % 2 == 0;
  return nullptr;
}

TEST(JsonMatcherTest, GeneratedDocumentsAreTakenByteByByte) {
  std::mt19937 rng(1);
  for (const char* text : kSchemas) {
    const json root = json::parse(text);
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(text);
    ASSERT_TRUE(schema.ok()) << schema.status();
    for (int i = 0; i < 200; ++i) {
      const json doc = Generate(root, root, rng);
      ASSERT_TRUE(Valid(root, root, doc)) << doc.dump();  // the generator's own check
      const std::string written = doc.dump();
      JsonMatcher m(*schema);
      for (size_t b = 0; b < written.size(); ++b) {
        ASSERT_TRUE(m.Advance(written.substr(b, 1))) << text << "\n" << written << " at " << b;
      }
      EXPECT_TRUE(m.Complete()) << written;
    }
  }
}

// Random walks over the bytes the matcher allows (ending once it is complete, sometimes or when
// it must): every document parses and validates.
TEST(JsonMatcherTest, EveryWalkOverAllowedBytesEndsValid) {
  std::mt19937 rng(2);
  int ended = 0;
  for (const char* text : kSchemas) {
    const json root = json::parse(text);
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(text);
    ASSERT_TRUE(schema.ok()) << schema.status();
    for (int walk = 0; walk < 300; ++walk) {
      JsonMatcher m(*schema);
      std::string written;
      for (int step = 0; step < 400; ++step) {
        if (m.MustEnd() || (m.Complete() && rng() % 4 == 0)) break;
        std::vector<int> allowed;
        for (int b = 1; b < 256; ++b) {
          JsonMatcher probe = m;
          const char ch = static_cast<char>(b);
          if (probe.Advance({&ch, 1})) allowed.push_back(b);
        }
        if (allowed.empty() && m.Complete()) break;  // e.g. "0" or a longest number
        ASSERT_FALSE(allowed.empty()) << "stuck after " << written;
        // Favour the bytes that close things, so walks end.
        int b = allowed[rng() % allowed.size()];
        for (int pref : {'"', '}', ']', ',', '0'}) {
          if (rng() % 3 == 0 && std::count(allowed.begin(), allowed.end(), pref)) b = pref;
        }
        const char ch = static_cast<char>(b);
        ASSERT_TRUE(m.Advance({&ch, 1}));
        written += ch;
      }
      if (!m.Complete()) continue;
      ++ended;
      const json doc = json::parse(written, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(doc.is_discarded()) << written;
      EXPECT_TRUE(Valid(root, root, doc)) << text << "\n" << written;
    }
  }
  EXPECT_GT(ended, 1000);
}

TEST(JsonMatcherTest, InvalidTextIsRefusedAtTheFirstWrongByte) {
  absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(kSchemas[0]);
  ASSERT_TRUE(schema.ok());
  for (const char* bad : {R"( {)", R"({"age":1)", R"({"name":"123456789")", R"({"name":"a","x")",
                          R"({"name":"a"})", R"({"ok":true,"name":"a"})", R"({"name":01)",
                          R"({"name":"a","ok":tru })", "{\"name\":\"\x01", "{\"name\":\"\xc0",
                          R"({"name":"\ud800)", R"({"name":"a","ok":true}})"}) {
    JsonMatcher m(*schema);
    EXPECT_FALSE(m.Advance(bad) && m.Complete()) << bad;
  }
  JsonMatcher m(*schema);
  ASSERT_TRUE(m.Advance(R"({"name":"a","ok":false})"));
  EXPECT_TRUE(m.Complete());
  EXPECT_TRUE(m.MustEnd());
  EXPECT_FALSE(m.Advance(" "));  // compact: nothing after the value
  EXPECT_TRUE(m.Complete());     // a refused byte leaves the matcher as it was

  absl::StatusOr<JsonSchema> integer = JsonSchema::Compile(R"({"type": "integer"})");
  JsonMatcher n(*integer);
  EXPECT_TRUE(n.Advance("-12"));
  EXPECT_TRUE(n.Complete());
  EXPECT_FALSE(n.MustEnd());
  EXPECT_FALSE(n.Advance("."));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreRefusedByName) {
  struct Case {
    const char* schema;
    const char* named;
  } cases[] = {
      {R"({"type": "string", "pattern": "(?=a)b"})", "pattern: at offset 2: lookahead"},
      {R"({"type": "string", "pattern": "^a$", "minLength": 2})", "no text matches the pattern"},
      {R"({"type": "string", "pattern": "^\\x01$"})", "no text matches"},  // not writable
      {R"({"anyOf": [{"type": "string"}], "minLength": 2})", "minLength: beside anyOf"},
      {R"({"$defs": {"x": {}}, "$ref": "#/$defs/x", "enum": [1]})", "enum: beside $ref"},
      {R"({"enum": ["abc"], "maxLength": 2})", "enum: no value satisfies"},
      {R"({"type": "integer", "minimum": 3})", "minimum"},
      {R"({"oneOf": [{"type": "string"}]})", "oneOf"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}})",
       "properties.a.format"},
      {R"({"type": "array", "items": [{"type": "string"}]})", "items"},
      {R"({"$ref": "https://example.com/s.json"})", "$ref"},
      {R"({"$ref": "#/$defs/missing"})", "$ref"},
      {R"({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
           "$ref": "#/$defs/t"})",
       "recursive"},
      {R"({"type": "colour"})", "type"},
      {R"({"type": "object", "required": ["z"], "properties": {"a": {}}})", "required"},
      {R"({"type": "string", "enum": [1, 2]})", "enum"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "maxLength"},
      {R"({"type": "object", "additionalProperties": {"type": "string"}})", "additionalProperties"},
      {R"([1, 2])", "object"},
      {R"({"type": )", ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(c.schema);
    ASSERT_FALSE(schema.ok()) << c.schema;
    EXPECT_EQ(schema.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(schema.status().message()), ::testing::HasSubstr(c.named)) << c.schema;
  }
  EXPECT_TRUE(JsonSchema::Compile(R"({"type": "string", "enum": ["a", 1], "title": "t"})").ok());
  // The patterns of one schema share one compile budget: many costly ones are refused.
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 250; ++i) {
    many += absl::StrCat(i ? ", " : "", "\"p", i,
                         R"(": {"type": "string", "pattern": "[ab]*a[ab]{9}$"})");
  }
  many += "}}";
  absl::StatusOr<JsonSchema> costly = JsonSchema::Compile(many);
  ASSERT_FALSE(costly.ok());
  EXPECT_THAT(std::string(costly.status().message()), ::testing::HasSubstr("too complex"));
}

TEST(TokenVocabularyTest, MasksEqualFeedingEachTokenAlone) {
  std::mt19937 rng(3);
  const std::vector<std::string> tokens = testing::RandomJsonTokens(rng);
  const TokenVocabulary vocabulary(tokens);
  for (const char* text : kSchemas) {
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(text);
    ASSERT_TRUE(schema.ok());
    JsonMatcher m(*schema);
    for (int step = 0; step < 30 && !m.MustEnd(); ++step) {
      const TokenBits allowed = vocabulary.Allowed(m);
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < vocabulary.size(); ++id) {
        JsonMatcher alone = m;
        const bool takes = !tokens[id].empty() && alone.Advance(tokens[id]);
        ASSERT_EQ(HasToken(allowed, id), takes) << "token " << id << " '" << tokens[id] << "'";
        if (takes) ids.push_back(id);
      }
      if (ids.empty()) break;
      ASSERT_TRUE(m.Advance(tokens[ids[rng() % ids.size()]]));
    }
  }
}

}  // namespace
}  // namespace yoco
