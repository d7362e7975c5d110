// JsonSchema: the subset of JSON Schema that constrained decoding honours, compiled into a tree
// of SchemaNodes that JsonMatcher walks byte by byte. The subset (docs/serving.md lists it):
// type (one, or a list), properties, required, additionalProperties (false, or absent under
// json_object semantics), enum, const, items, minItems, maxItems, minLength, maxLength, pattern
// (lib/grammar/regex.h), anyOf, $defs/definitions with local $ref, and the annotations title,
// description, default, examples, $schema, $id, $comment. Any other keyword is refused by name: a
// schema we cannot enforce must not be half-enforced.
#ifndef YOCO_LIB_GRAMMAR_JSON_SCHEMA_H_
#define YOCO_LIB_GRAMMAR_JSON_SCHEMA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/grammar/char_dfa.h"

namespace yoco {

struct SchemaNode {
  enum class Kind {
    kAny,  // any JSON value
    kObject,
    kArray,
    kString,
    kInteger,
    kNumber,
    kBoolean,
    kNull,
    kLiterals,  // enum / const: one of `literals`
    kAnyOf,     // one of `alternatives`
  };
  struct Property {
    std::string key_json;  // the key as compact JSON text, quotes included
    const SchemaNode* value = nullptr;
    bool required = false;
  };

  Kind kind = Kind::kAny;
  // kObject: properties in the schema's order, written in that order; with `open`, any keys and
  // values instead (json_object, or a schema without properties).
  std::vector<Property> properties;
  bool open = false;
  // kArray.
  const SchemaNode* items = nullptr;
  int64_t min_items = 0;
  int64_t max_items = -1;  // -1: unbounded
  // kString, in Unicode code points. With a pattern, the bounds are part of it.
  int64_t min_length = 0;
  int64_t max_length = -1;
  std::shared_ptr<const CharDfa> pattern;  // over the string's decoded text
  // kLiterals: compact JSON texts.
  std::vector<std::string> literals;
  // kAnyOf.
  std::vector<const SchemaNode*> alternatives;
};

// A compiled schema: its nodes, owned together (a $ref makes the tree a graph).
class JsonSchema {
 public:
  // INVALID_ARGUMENT naming the problem and its place ("properties.name.type: ..."): not JSON,
  // not an object, an unsupported keyword, a bad value, a $ref that is not local or not found,
  // recursion through $ref, more than 512 nodes.
  static absl::StatusOr<JsonSchema> Compile(absl::string_view schema_json);
  // Any JSON object (OpenAI's response_format json_object).
  static JsonSchema AnyObject();

  const SchemaNode* root() const { return root_; }
  // The nodes kAny values nest (shared by every schema).
  static const SchemaNode* AnyValue();
  static const SchemaNode* AnyString();

 private:
  std::vector<std::unique_ptr<SchemaNode>> nodes_;
  const SchemaNode* root_ = nullptr;
  friend class SchemaCompiler;
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_JSON_SCHEMA_H_
