// Text: the byte tokenizer encodes any valid UTF-8 and decodes it back exactly; the UTF-8
// repair used for streamed tokens and Detokenize always gives valid UTF-8, leaves valid text as
// it is, and gives the same text whether the bytes arrive at once or split anywhere.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/text/byte_tokenizer.h"
#include "lib/text/utf8_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string repaired = yoco::ToValidUtf8(bytes);
  if (yoco::ToValidUtf8(repaired) != repaired) __builtin_trap();
  const bool valid = repaired == bytes;

  // Streamed in two pieces split at every byte boundary a token could end on.
  if (size > 0) {
    const size_t cut = data[0] % (size + 1);
    std::string streamed, seen = bytes.substr(0, cut);
    size_t pos = 0;
    yoco::AppendValidUtf8(seen, &pos, &streamed);
    seen = bytes;
    yoco::AppendValidUtf8(seen, &pos, &streamed);
    if (valid && streamed != bytes) __builtin_trap();
  }

  yoco::ByteTokenizer tokenizer;
  auto ids = tokenizer.Encode(bytes);
  if (ids.ok()) {
    auto text = tokenizer.Decode(*ids);
    if (!text.ok() || *text != bytes) __builtin_trap();
  } else if (valid) {
    __builtin_trap();  // valid UTF-8 always encodes
  }
  return 0;
}
