// StateLedger: reader counts per chunk.
#include "lib/batching/state_ledger.h"

namespace yoco {

template <typename F>
void StateLedger::ForEachFullChunk(const SequenceState& state, F f) {
  for (const KvRows* rows : {&state.shared_k, &state.shared_v}) {
    const int64_t full = rows->rows() / KvRows::kChunkRows;
    const int64_t bytes = KvRows::kChunkRows * rows->width() * KvDtypeBytes(rows->dtype());
    for (int64_t i = 0; i < full; ++i) f(static_cast<const void*>(rows->chunk_data(i)), bytes);
  }
}

int64_t StateLedger::OwnBytes(const SequenceState& state, int64_t growth_bytes) {
  int64_t full_bytes = 0;
  ForEachFullChunk(state, [&](const void*, int64_t bytes) { full_bytes += bytes; });
  return state.bytes() - full_bytes + growth_bytes;
}

int64_t StateLedger::Cost(const SequenceState& state, int64_t growth_bytes) const {
  int64_t cost = OwnBytes(state, growth_bytes);
  ForEachFullChunk(state, [&](const void* chunk, int64_t bytes) {
    if (readers_.count(chunk) == 0) cost += bytes;
  });
  return cost;
}

StateLedger::Charge StateLedger::Add(const SequenceState& state, int64_t growth_bytes) {
  Charge charge;
  charge.own_bytes = OwnBytes(state, growth_bytes);
  bytes_ += charge.own_bytes;
  ForEachFullChunk(state, [&](const void* chunk, int64_t bytes) {
    Readers& r = readers_[chunk];
    if (r.count++ == 0) {
      r.bytes = bytes;
      bytes_ += bytes;
    }
    charge.chunks.push_back(chunk);
  });
  return charge;
}

void StateLedger::Remove(const Charge& charge) {
  bytes_ -= charge.own_bytes;
  for (const void* chunk : charge.chunks) {
    auto it = readers_.find(chunk);
    if (--it->second.count == 0) {
      bytes_ -= it->second.bytes;
      readers_.erase(it);
    }
  }
}

}  // namespace yoco
