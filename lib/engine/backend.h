// Backend: the one interface through which everything above the engine runs the model. The CPU
// backend implements it today; a CUDA backend will implement the same verbs.
#ifndef YOCO_LIB_ENGINE_BACKEND_H_
#define YOCO_LIB_ENGINE_BACKEND_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lib/engine/model.h"
#include "lib/engine/sequence_state.h"

namespace yoco {

// Which rows of a segment produce logits. Cross-decoder layers run only for those rows (YOCO's
// prefill early exit: later tokens never read earlier cross-decoder outputs).
enum class LogitsMode {
  kNone,  // only advance the state (self-decoder + shared K/V)
  kLast,  // logits of the segment's last token
  kAll,   // logits of every token (full-sequence scoring)
};

// Tokens to run for one sequence, continuing from `state->position`.
struct ForwardSegment {
  SequenceState* state = nullptr;
  absl::Span<const int32_t> tokens;
  LogitsMode logits = LogitsMode::kNone;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const Model& model() const = 0;

  // Runs every segment's tokens through the model in one pass (prefill chunks and decode steps
  // may be mixed), appending to each state. `logits` receives [rows, vocab] fp32: the rows each
  // segment asked for, segments in order. Bad token ids, an empty segment, a state of another
  // shape or a position past max_seq_len are INVALID_ARGUMENT and leave every state untouched.
  virtual absl::Status Forward(absl::Span<const ForwardSegment> segments,
                               std::vector<float>* logits) = 0;

  // Makes every field of `state` current in host memory. Backends that keep a state's
  // constant-size parts on a device between calls (CudaBackendOptions::lazy_host_states) copy
  // them back here; callers that serialize a state (bundles, snapshots) call it first.
  virtual absl::Status SyncState(SequenceState* state) { return absl::OkStatus(); }
};

// The checks every backend's Forward makes before touching a state: INVALID_ARGUMENT naming the
// segment for a missing state, no tokens, a state shared by two segments, a state of another
// shape, a token outside the vocabulary or a sequence past max_seq_len.
absl::Status ValidateSegments(const ModelConfig& config, absl::Span<const ForwardSegment> segments);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_BACKEND_H_
