// Byte tokenizer.
#include "lib/text/byte_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace yoco {

absl::StatusOr<std::vector<int32_t>> ByteTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + kTokenizerIdOffset);
  return ids;
}

absl::StatusOr<std::string> ByteTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < kTokenizerIdOffset) continue;
    if (id < 0 || id >= id_limit()) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not a byte token"));
    }
    out.push_back(static_cast<char>(id - kTokenizerIdOffset));
  }
  return out;
}

}  // namespace yoco
