// StateLedger: the state memory a decode batch holds, with each full shared-K/V chunk counted
// once however many sequences read it. Thirty-two questions on one pre-cached document hold the
// document's K/V once (the chunks are shared: KvRows, ResidentKv), so they are charged for it
// once, and the budget admits them as it admits one question plus 31 tails.
//
// A sequence is charged, when it joins, for its self-decoder states, the rows of its partly
// filled last chunk, the rows it may still add, and the full chunks no sequence in the ledger
// reads yet; a chunk's bytes are released when its last reader leaves. Not thread-safe (the
// batching loop owns it).
#ifndef YOCO_LIB_BATCHING_STATE_LEDGER_H_
#define YOCO_LIB_BATCHING_STATE_LEDGER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "lib/engine/sequence_state.h"

namespace yoco {

class StateLedger {
 public:
  // What a sequence joined with: the chunks it was charged a share of, and its own bytes.
  struct Charge {
    std::vector<const void*> chunks;
    int64_t own_bytes = 0;
  };

  // The bytes that adding `state` with room for `growth_bytes` more would add now.
  int64_t Cost(const SequenceState& state, int64_t growth_bytes) const;
  // Adds it; keep the charge to remove it with.
  Charge Add(const SequenceState& state, int64_t growth_bytes);
  void Remove(const Charge& charge);

  int64_t bytes() const { return bytes_; }
  // Chunks counted (each once).
  int64_t chunks() const { return static_cast<int64_t>(readers_.size()); }

 private:
  // Calls f(chunk, bytes) for each full chunk of the state's shared K and V.
  template <typename F>
  static void ForEachFullChunk(const SequenceState& state, F f);
  static int64_t OwnBytes(const SequenceState& state, int64_t growth_bytes);

  struct Readers {
    int64_t count = 0;
    int64_t bytes = 0;
  };
  std::map<const void*, Readers> readers_;
  int64_t bytes_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_BATCHING_STATE_LEDGER_H_
