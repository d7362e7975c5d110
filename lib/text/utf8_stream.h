// Turning the bytes of a token stream into valid UTF-8 text as tokens arrive: tokens are byte
// sequences, a character may span tokens, and the API's text must be valid UTF-8.
#ifndef YOCO_LIB_TEXT_UTF8_STREAM_H_
#define YOCO_LIB_TEXT_UTF8_STREAM_H_

#include <cstddef>
#include <string>

namespace yoco {

// Appends the valid UTF-8 text of bytes[*pos, end) to `out`, each invalid byte as U+FFFD, and
// advances *pos. An incomplete sequence at the very end is left for the next call (the next
// token may complete it).
void AppendValidUtf8(const std::string& bytes, size_t* pos, std::string* out);

// All of `bytes` as valid UTF-8, every invalid or incomplete byte as U+FFFD (for proto3 `string`
// fields, which strict clients refuse to parse otherwise).
std::string ToValidUtf8(const std::string& bytes);

}  // namespace yoco

#endif  // YOCO_LIB_TEXT_UTF8_STREAM_H_
