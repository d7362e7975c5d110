// Checks shared by every backend.
#include "lib/engine/backend.h"

#include "absl/strings/str_cat.h"

namespace yoco {

absl::Status ValidateSegments(const ModelConfig& config,
                              absl::Span<const ForwardSegment> segments) {
  for (size_t s = 0; s < segments.size(); ++s) {
    const ForwardSegment& seg = segments[s];
    if (seg.state == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("segment ", s, ": no state"));
    if (seg.tokens.empty())
      return absl::InvalidArgumentError(absl::StrCat("segment ", s, ": no tokens"));
    for (size_t t = 0; t < s; ++t) {
      if (segments[t].state == seg.state) {
        return absl::InvalidArgumentError(
            absl::StrCat("segments ", t, " and ", s, " share a state"));
      }
    }
    if (absl::Status st = seg.state->CheckShape(config); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("segment ", s, ": ", st.message()));
    }
    for (int32_t tok : seg.tokens) {
      if (tok < 0 || tok >= config.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "token id ", tok, " is outside the vocabulary [0, ", config.vocab_size, ")"));
      }
    }
    const int64_t end = seg.state->position + static_cast<int64_t>(seg.tokens.size());
    if (config.max_seq_len > 0 && end > config.max_seq_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence of ", end, " tokens exceeds max_seq_len ", config.max_seq_len));
    }
  }
  return absl::OkStatus();
}

}  // namespace yoco
