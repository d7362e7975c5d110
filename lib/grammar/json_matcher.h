// JsonMatcher: whether bytes written so far are the start of compact JSON text that a JsonSchema
// accepts, byte by byte — what constrained decoding asks of every candidate token. It follows
// every reading the schema allows at once (anyOf, optional properties, enum values that share a
// start), so a byte is refused only when no reading survives it. The text it accepts is compact
// (no whitespace between tokens), properties in the schema's order, integers of at most 18
// digits, numbers of at most 24 characters with at most 2 exponent digits, strings valid UTF-8
// without \u escapes of surrogates.
#ifndef YOCO_LIB_GRAMMAR_JSON_MATCHER_H_
#define YOCO_LIB_GRAMMAR_JSON_MATCHER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "lib/grammar/json_schema.h"

namespace yoco {

class JsonMatcher {
 public:
  // `schema` outlives the matcher (and its copies).
  explicit JsonMatcher(const JsonSchema& schema) : JsonMatcher(schema.root()) {}
  // Values of one node of a schema (which outlives the matcher).
  explicit JsonMatcher(const SchemaNode* node);

  // Feeds `bytes`: false, leaving the matcher as it was, when they cannot continue valid text.
  bool Advance(absl::string_view bytes);
  // Whether the text so far is one whole value the schema accepts (the end may come now).
  bool Complete() const;
  // Whether the end is the only thing that may come (complete, and no byte continues it).
  bool MustEnd() const;

  // One reading's place in the text: a stack of the values it is inside.
  struct Frame {
    const SchemaNode* node = nullptr;
    uint8_t state = 0;
    // Property index, item count, string length or pattern state, literal index, number length.
    int32_t a = 0;
    int32_t b = 0;  // position in a key or literal; a string's pending UTF-8 or escape bytes
    int32_t c = 0;  // a string's bounds for the next UTF-8 byte
    bool operator==(const Frame&) const = default;
    auto operator<=>(const Frame&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Frame& f) {
      return H::combine(std::move(h), f.node, f.state, f.a, f.b, f.c);
    }
  };
  using Reading = std::vector<Frame>;
  // Where the text is: equal readings allow the same bytes next.
  const std::vector<Reading>& readings() const { return readings_; }

 private:
  JsonMatcher() = default;
  std::vector<Reading> readings_;
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_JSON_MATCHER_H_
