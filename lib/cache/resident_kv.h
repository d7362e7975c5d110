// ResidentKv: a decode worker's shared-K/V chunks, kept after the sequences that brought them
// end, under their names (the prefix cache's block keys, salted per tenant), so that the next
// question on a document references them instead of receiving them again: a prefill worker
// leaves chunks the decode worker holds out of the bundle (StateBundle::resident_chunks), and
// every sequence on the document reads the one copy.
//
// Chunks some sequence still reads are never let go; the others go least recently used first
// when their bytes exceed the budget (those in use are counted with their sequences). A chunk
// is immutable once full (KvRows), so handing it to a sequence is handing out a reference.
// Thread-safe.
#ifndef YOCO_LIB_CACHE_RESIDENT_KV_H_
#define YOCO_LIB_CACHE_RESIDENT_KV_H_

#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "lib/engine/kv_rows.h"
#include "lib/engine/state_bundle.h"

namespace yoco {

struct ResidentKvStats {
  int64_t chunks = 0;      // held
  int64_t bytes = 0;       // of the chunks held (K and V)
  int64_t idle_bytes = 0;  // of those no sequence reads
  uint64_t attached = 0;   // chunks put in front of bundles instead of being received
  uint64_t missing = 0;    // bundles refused for a chunk not held
  uint64_t evictions = 0;  // chunks let go for the budget
};

class ResidentKv {
 public:
  // `budget_bytes`: the most K/V bytes held for no sequence (0: nothing is kept after use).
  explicit ResidentKv(int64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Puts the chunks a parsed bundle left out in front of the rows it carried, so its state
  // holds every row. NOT_FOUND, naming the first chunk, when one is not held (let go since
  // the sender learnt of it): the sender then sends the bundle whole.
  absl::Status Attach(StateBundle* bundle);

  // Keeps the named chunks of a whole bundle (after Attach), refreshing those already held,
  // then lets idle chunks go down to the budget.
  void Keep(const StateBundle& bundle);

  ResidentKvStats stats() const;

 private:
  struct Entry {
    KvRows k, v;  // one chunk each
    uint64_t last_use = 0;
  };
  // Whether a sequence (or a bundle) still holds the entry's chunks.
  static bool InUse(const Entry& e);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t budget_bytes_;
  mutable absl::Mutex mu_;
  std::map<ChunkName, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  ResidentKvStats stats_ ABSL_GUARDED_BY(mu_);  // (chunks/bytes computed in stats)
};

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_RESIDENT_KV_H_
