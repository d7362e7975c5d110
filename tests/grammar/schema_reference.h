// A reference for JSON Schema's meaning of the keywords the grammar library supports, read off
// the schema text itself (not the compiled tree), and the schemas the grammar tests use.
#ifndef YOCO_TESTS_GRAMMAR_SCHEMA_REFERENCE_H_
#define YOCO_TESTS_GRAMMAR_SCHEMA_REFERENCE_H_

#include <cstdint>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace yoco::testing {

using json = nlohmann::json;

// Unicode code points of UTF-8 text (what minLength and maxLength count).
inline int64_t CodePoints(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

// 400 random tokens of JSON's bytes (and a 2-byte character), after 3 specials (empty).
inline std::vector<std::string> RandomJsonTokens(std::mt19937& rng) {
  std::vector<std::string> tokens = {"", "", ""};
  const std::string alphabet = "{}[]\",:0123456789-.eE truefalsnl\\ab\xc3\xa9";
  for (int i = 0; i < 400; ++i) {
    std::string t;
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n)
      t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  return tokens;
}

inline const json* Resolve(const json& root, const json& s) {
  if (!s.contains("$ref")) return &s;
  const std::string ref = s["$ref"];
  const std::string name = ref.substr(ref.find_last_of('/') + 1);
  return root.contains("$defs") ? &root["$defs"][name] : &root["definitions"][name];
}

inline bool TypeIs(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

// JSON Schema's meaning of the keywords the matcher supports, read off the schema text.
inline bool Valid(const json& root, const json& schema, const json& v) {
  const json& s = *Resolve(root, schema);
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("type")) {
    const json& t = s["type"];
    bool any = false;
    if (t.is_string()) any = TypeIs(v, t);
    for (const json& one : t.is_array() ? t : json::array()) any |= TypeIs(v, one);
    if (!any) return false;
  }
  if (s.contains("enum")) {
    bool found = false;
    for (const json& e : s["enum"]) found |= e == v;
    if (!found) return false;
  }
  if (s.contains("const") && s["const"] != v) return false;
  if (s.contains("anyOf")) {
    bool any = false;
    for (const json& alt : s["anyOf"]) any |= Valid(root, alt, v);
    if (!any) return false;
  }
  if (v.is_object()) {
    for (const json& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    const json props = s.value("properties", json::object());
    for (const auto& [k, value] : v.items()) {
      if (props.contains(k)) {
        if (!Valid(root, props[k], value)) return false;
      } else if (s.contains("additionalProperties") && !s["additionalProperties"].get<bool>()) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    if (s.contains("items")) {
      for (const json& item : v) {
        if (!Valid(root, s["items"], item)) return false;
      }
    }
  }
  if (v.is_string()) {
    const int64_t n = CodePoints(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<int64_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<int64_t>()) return false;
    // std::regex reads bytes: the same as code points for the ASCII patterns used here.
    if (s.contains("pattern") &&
        !std::regex_search(v.get<std::string>(),
                           std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript))) {
      return false;
    }
  }
  return true;
}

inline const char* kSchemas[] = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string",
        "maxLength": 3}, "maxItems": 3}, "ok": {"type": "boolean"}},
        "required": ["name", "ok"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"kind": {"enum": ["a", "ab", 1, 10, null, true]},
        "x": {"anyOf": [{"type": "number"}, {"type": "null"},
        {"type": "string", "minLength": 2, "maxLength": 4}]}}, "required": ["kind", "x"]})",
    R"({"$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"},
        "y": {"type": "number"}}, "required": ["x", "y"], "additionalProperties": false}},
        "type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1, "maxItems": 4})",
    R"({"type": "object", "properties": {"a": {"type": "object"}, "b": {"type": ["string",
        "integer"], "maxLength": 2}, "c": {"const": "fixed"}}, "required": ["c"]})",
    R"({"type": "object"})",
    R"({"type": "integer"})",
    // Patterns (the generator writes their examples), a quote the pattern needs written escaped,
    // and an enum whose maxLength keeps two of its three values.
    R"({"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[a-z]{2}[0-9]+$", "maxLength": 6,
               "examples": ["ab1", "zz9999"]},
        "tag": {"type": "string", "pattern": "x|y\"z", "maxLength": 5,
                "examples": ["x", "ay\"z", "\\x"]},
        "e": {"enum": ["a", "bb", "ccc"], "maxLength": 2},
        "n": {"type": ["string", "null"], "pattern": "^\\d{1,2}$", "examples": ["7", "42"]}},
        "required": ["id", "tag", "e"], "additionalProperties": false})",
};

}  // namespace yoco::testing

#endif  // YOCO_TESTS_GRAMMAR_SCHEMA_REFERENCE_H_
