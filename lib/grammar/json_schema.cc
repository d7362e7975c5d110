// Compiling a schema: every keyword is either understood, an annotation, or refused by name.
#include "lib/grammar/json_schema.h"

#include <algorithm>
#include <bitset>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/grammar/json_matcher.h"
#include "lib/grammar/regex.h"
#include "lib/model/strict_json.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

using json = nlohmann::json;

constexpr int kMaxNodes = 512;

const std::set<std::string>& Annotations() {
  static const auto* names =
      new std::set<std::string>{"title", "description", "default", "examples",   "$schema",
                                "$id",   "$comment",    "$defs",   "definitions"};
  return *names;
}

const std::set<std::string>& Understood() {
  static const auto* names =
      new std::set<std::string>{"type",     "properties", "required",  "additionalProperties",
                                "enum",     "const",      "items",     "minItems",
                                "maxItems", "minLength",  "maxLength", "pattern",
                                "anyOf",    "$ref"};
  return *names;
}

absl::Status Refuse(const std::string& where, absl::string_view problem) {
  return absl::InvalidArgumentError(where.empty() ? std::string(problem)
                                                  : absl::StrCat(where, ": ", problem));
}

std::string At(const std::string& where, absl::string_view key) {
  return where.empty() ? std::string(key) : absl::StrCat(where, ".", key);
}

// The first keyword of `s` that asserts something besides those named (annotations do not).
std::string OtherAssertion(const json& s, std::initializer_list<const char*> besides) {
  for (const auto& item : s.items()) {
    const std::string& key = item.key();  // (clang cannot capture a structured binding)
    if (Annotations().count(key) > 0) continue;
    if (std::none_of(besides.begin(), besides.end(), [&](const char* b) { return key == b; })) {
      return key;
    }
  }
  return "";
}

// The ASCII a JSON string can hold once decoded, as constrained output writes it: all but the
// control characters without a short escape (\b \f \n \r \t).
std::bitset<128> StringAscii() {
  std::bitset<128> ascii;
  for (int c = 0x20; c < 128; ++c) ascii.set(c);
  for (int c : {0x08, 0x09, 0x0a, 0x0c, 0x0d}) ascii.set(c);
  return ascii;
}
}  // namespace

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& document) : document_(document) {}

  absl::StatusOr<JsonSchema> Run() {
    absl::StatusOr<const SchemaNode*> root = Node(document_, "");
    if (!root.ok()) return root.status();
    schema_.root_ = *root;
    return std::move(schema_);
  }

 private:
  SchemaNode* Make(SchemaNode::Kind kind) {
    schema_.nodes_.push_back(std::make_unique<SchemaNode>());
    schema_.nodes_.back()->kind = kind;
    return schema_.nodes_.back().get();
  }

  static absl::StatusOr<int64_t> Count(const json& s, const char* key, const std::string& where) {
    const json& v = s[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t{1} << 31)) {
      return Refuse(At(where, key), "must be a non-negative integer");
    }
    return v.get<int64_t>();
  }

  // A pair of count keywords (minLength/maxLength, minItems/maxItems) into *min and *max (left
  // as they are when absent); max below min is refused.
  static absl::Status Bounds(const json& s, const char* min_key, const char* max_key,
                             const std::string& where, int64_t* min, int64_t* max) {
    if (s.contains(min_key)) {
      absl::StatusOr<int64_t> n = Count(s, min_key, where);
      if (!n.ok()) return n.status();
      *min = *n;
    }
    if (s.contains(max_key)) {
      absl::StatusOr<int64_t> n = Count(s, max_key, where);
      if (!n.ok()) return n.status();
      *max = *n;
      if (*max < *min) return Refuse(At(where, max_key), absl::StrCat("is below ", min_key));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<const SchemaNode*> Node(const json& s, const std::string& where) {
    if (schema_.nodes_.size() >= kMaxNodes) {
      return Refuse(where, absl::StrCat("the schema has more than ", kMaxNodes, " parts"));
    }
    if (s.is_boolean() && s.get<bool>()) return JsonSchema::AnyValue();
    if (!s.is_object()) return Refuse(where, "a schema must be an object");
    for (const auto& [key, value] : s.items()) {
      if (Understood().count(key) == 0 && Annotations().count(key) == 0) {
        return Refuse(At(where, key),
                      "is not supported (constrained decoding honours type, "
                      "properties, required, additionalProperties, enum, const, "
                      "items, minItems, maxItems, minLength, maxLength, pattern, "
                      "anyOf and local $ref)");
      }
    }
    // Keywords beside $ref or anyOf would have to hold as well: refused rather than ignored.
    for (const char* alone : {"$ref", "anyOf"}) {
      if (!s.contains(alone)) continue;
      if (std::string other = OtherAssertion(s, {alone}); !other.empty()) {
        return Refuse(At(where, other), absl::StrCat("beside ", alone, " is not supported"));
      }
    }
    if (s.contains("$ref")) return Ref(s, where);
    if (s.contains("enum") || s.contains("const")) return Literals(s, where);
    if (s.contains("anyOf")) return AnyOf(s, where);
    if (!s.contains("type")) {
      // Keywords of one type without a type: values of that type satisfy them (and the others
      // would too, but one type is enough to write valid output).
      for (const char* key : {"properties", "required", "additionalProperties"}) {
        if (s.contains(key)) return Typed(s, "object", where);
      }
      for (const char* key : {"items", "minItems", "maxItems"}) {
        if (s.contains(key)) return Typed(s, "array", where);
      }
      for (const char* key : {"minLength", "maxLength", "pattern"}) {
        if (s.contains(key)) return Typed(s, "string", where);
      }
      return JsonSchema::AnyValue();
    }
    const json& type = s["type"];
    if (type.is_string()) return Typed(s, type.get<std::string>(), where);
    if (!type.is_array() || type.empty()) {
      return Refuse(At(where, "type"), "must be a type name or a non-empty list of them");
    }
    SchemaNode* any_of = Make(SchemaNode::Kind::kAnyOf);
    for (const json& t : type) {
      if (!t.is_string()) return Refuse(At(where, "type"), "must list type names");
      absl::StatusOr<const SchemaNode*> alt = Typed(s, t.get<std::string>(), where);
      if (!alt.ok()) return alt.status();
      any_of->alternatives.push_back(*alt);
    }
    return any_of;
  }

  absl::StatusOr<const SchemaNode*> Typed(const json& s, const std::string& type,
                                          const std::string& where) {
    using Kind = SchemaNode::Kind;
    if (type == "object") return Object(s, where);
    if (type == "array") return Array(s, where);
    if (type == "string") {
      SchemaNode* node = Make(Kind::kString);
      absl::Status bounds =
          Bounds(s, "minLength", "maxLength", where, &node->min_length, &node->max_length);
      if (!bounds.ok()) return bounds;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) return Refuse(At(where, "pattern"), "must be a string");
        RegexOptions options;
        options.search = true;  // JSON Schema's pattern matches anywhere unless anchored
        options.min_chars = node->min_length;
        options.max_chars = node->max_length;
        options.ascii = StringAscii();
        options.max_work = pattern_work_left_;  // one budget for all the schema's patterns
        int64_t used = 0;
        options.work_used = &used;
        absl::StatusOr<CharDfa> dfa = CompileRegex(s["pattern"].get<std::string>(), options);
        pattern_work_left_ -= used;
        if (!dfa.ok()) return Refuse(At(where, "pattern"), dfa.status().message());
        node->pattern = std::make_shared<const CharDfa>(*std::move(dfa));
      }
      return node;
    }
    if (type == "integer") return Make(Kind::kInteger);
    if (type == "number") return Make(Kind::kNumber);
    if (type == "boolean") return Make(Kind::kBoolean);
    if (type == "null") return Make(Kind::kNull);
    return Refuse(At(where, "type"), absl::StrCat("\"", type, "\" is not a JSON Schema type"));
  }

  absl::StatusOr<const SchemaNode*> Object(const json& s, const std::string& where) {
    SchemaNode* node = Make(SchemaNode::Kind::kObject);
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) return Refuse(At(where, "required"), "must be a list of property names");
      for (const json& name : r) {
        if (!name.is_string()) return Refuse(At(where, "required"), "must list property names");
        required.insert(name.get<std::string>());
      }
    }
    bool additional = true;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!a.is_boolean()) {
        return Refuse(At(where, "additionalProperties"),
                      "only true or false is supported (not a schema)");
      }
      additional = a.get<bool>();
    }
    if (!s.contains("properties")) {
      if (!required.empty()) {
        return Refuse(At(where, "required"), "names properties the schema does not define");
      }
      node->open = additional;  // {} or an object of anything
      return node;
    }
    const json& properties = s["properties"];
    if (!properties.is_object()) return Refuse(At(where, "properties"), "must be an object");
    // Properties are written in the schema's order, each at most once, none other: an object the
    // schema describes exactly (OpenAI's strict mode). additionalProperties true is honoured by
    // writing none: every object written is still valid.
    for (const auto& [name, value] : properties.items()) {
      absl::StatusOr<const SchemaNode*> child = Node(value, At(At(where, "properties"), name));
      if (!child.ok()) return child.status();
      node->properties.push_back({json(name).dump(), *child, required.count(name) > 0});
      required.erase(name);
    }
    if (!required.empty()) {
      return Refuse(At(where, "required"),
                    absl::StrCat("names \"", *required.begin(), "\", which is not a property"));
    }
    return node;
  }

  absl::StatusOr<const SchemaNode*> Array(const json& s, const std::string& where) {
    SchemaNode* node = Make(SchemaNode::Kind::kArray);
    node->items = JsonSchema::AnyValue();
    if (s.contains("items")) {
      if (s["items"].is_array()) {
        return Refuse(At(where, "items"), "tuple items (a list of schemas) are not supported");
      }
      absl::StatusOr<const SchemaNode*> items = Node(s["items"], At(where, "items"));
      if (!items.ok()) return items.status();
      node->items = *items;
    }
    absl::Status bounds =
        Bounds(s, "minItems", "maxItems", where, &node->min_items, &node->max_items);
    if (!bounds.ok()) return bounds;
    return node;
  }

  // The JSON Schema type name a value has ("integer" for whole numbers: they are numbers too).
  static bool OfType(const json& v, const std::string& type) {
    if (type == "integer") return v.is_number_integer();
    if (type == "number") return v.is_number();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    return false;
  }

  absl::StatusOr<const SchemaNode*> Literals(const json& s, const std::string& where) {
    if (s.contains("anyOf") || (s.contains("enum") && s.contains("const"))) {
      return Refuse(where, "enum and const stand without anyOf or each other");
    }
    std::vector<std::string> types;  // a type beside them keeps the values of that type
    if (s.contains("type")) {
      const json& type = s["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array()) {
        for (const json& t : type) {
          if (!t.is_string()) return Refuse(At(where, "type"), "must list type names");
          types.push_back(t.get<std::string>());
        }
      } else {
        return Refuse(At(where, "type"), "must be a type name or a list of them");
      }
    }
    std::vector<json> values;
    if (s.contains("const")) {
      values.push_back(s["const"]);
    } else {
      const json& list = s["enum"];
      if (!list.is_array() || list.empty()) {
        return Refuse(At(where, "enum"), "must be a non-empty list");
      }
      values.assign(list.begin(), list.end());
    }
    // Other keywords beside them (minLength, pattern, properties, ...) keep the values they
    // accept as written: a value our matcher takes, the validator takes.
    const SchemaNode* rest = nullptr;
    if (!OtherAssertion(s, {"enum", "const", "type"}).empty()) {
      json others = s;
      others.erase("enum");
      others.erase("const");
      absl::StatusOr<const SchemaNode*> made = Node(others, where);
      if (!made.ok()) return made.status();
      rest = *made;
    }
    SchemaNode* node = Make(SchemaNode::Kind::kLiterals);
    for (const json& v : values) {
      const bool typed = types.empty() || std::any_of(types.begin(), types.end(),
                                                      [&](auto& t) { return OfType(v, t); });
      const std::string text = v.dump();
      if (typed && (rest == nullptr || Accepts(rest, text))) node->literals.push_back(text);
    }
    if (node->literals.empty()) {
      return Refuse(At(where, s.contains("const") ? "const" : "enum"),
                    "no value satisfies the schema's other keywords");
    }
    return node;
  }

  static bool Accepts(const SchemaNode* node, const std::string& text) {
    JsonMatcher matcher(node);
    return matcher.Advance(text) && matcher.Complete();
  }

  absl::StatusOr<const SchemaNode*> AnyOf(const json& s, const std::string& where) {
    if (s.contains("type")) return Refuse(where, "anyOf must stand without type");
    const json& alternatives = s["anyOf"];
    if (!alternatives.is_array() || alternatives.empty()) {
      return Refuse(At(where, "anyOf"), "must be a non-empty list of schemas");
    }
    SchemaNode* node = Make(SchemaNode::Kind::kAnyOf);
    for (size_t i = 0; i < alternatives.size(); ++i) {
      absl::StatusOr<const SchemaNode*> alt =
          Node(alternatives[i], absl::StrCat(At(where, "anyOf"), "[", i, "]"));
      if (!alt.ok()) return alt.status();
      node->alternatives.push_back(*alt);
    }
    return node;
  }

  absl::StatusOr<const SchemaNode*> Ref(const json& s, const std::string& where) {
    const json& ref = s["$ref"];
    if (!ref.is_string()) return Refuse(At(where, "$ref"), "must be a string");
    const std::string target = ref.get<std::string>();
    std::string name;
    const json* defs = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (target.rfind(prefix, 0) == 0) {
        name = target.substr(std::string(prefix).size());
        const char* key = prefix[2] == '$' ? "$defs" : "definitions";
        if (document_.is_object() && document_.contains(key)) defs = &document_[key];
      }
    }
    if (name.empty()) {
      return Refuse(At(where, "$ref"), "only local references (#/$defs/NAME) are supported");
    }
    if (defs == nullptr || !defs->is_object() || !defs->contains(name)) {
      return Refuse(At(where, "$ref"), absl::StrCat("\"", target, "\" is not defined"));
    }
    if (!resolving_.insert(target).second) {
      return Refuse(At(where, "$ref"), "recursive schemas are not supported");
    }
    absl::StatusOr<const SchemaNode*> node = Node((*defs)[name], target.substr(2));
    resolving_.erase(target);
    return node;
  }

  const json& document_;
  JsonSchema schema_;
  std::set<std::string> resolving_;  // $refs being compiled (a repeat is recursion)
  int64_t pattern_work_left_ = RegexOptions().max_work;
};

absl::StatusOr<JsonSchema> JsonSchema::Compile(absl::string_view schema_json) {
  JsonLimits limits;
  limits.max_depth = 32;
  limits.max_values = 1 << 14;
  absl::StatusOr<json> document = ParseStrictJson(schema_json, limits);
  if (!document.ok()) return document.status();
  return SchemaCompiler(*document).Run();
}

JsonSchema JsonSchema::AnyObject() {
  JsonSchema schema;
  schema.nodes_.push_back(std::make_unique<SchemaNode>());
  schema.nodes_.back()->kind = SchemaNode::Kind::kObject;
  schema.nodes_.back()->open = true;
  schema.root_ = schema.nodes_.back().get();
  return schema;
}

const SchemaNode* JsonSchema::AnyValue() {
  static const SchemaNode* node = [] {
    auto* n = new SchemaNode();
    n->kind = SchemaNode::Kind::kAny;
    return n;
  }();
  return node;
}

const SchemaNode* JsonSchema::AnyString() {
  static const SchemaNode* node = [] {
    auto* n = new SchemaNode();
    n->kind = SchemaNode::Kind::kString;
    return n;
  }();
  return node;
}

}  // namespace yoco
