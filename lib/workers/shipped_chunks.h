// ShippedChunks: which named K/V chunks (StateBundle::chunk_names) a prefill worker has sent to
// each decode worker, so that the next bundle for a decode worker leaves out the leading chunks
// it already holds (ResidentKv): a second question on a long document ships its own tokens'
// rows, not the document. A guess, not a promise: a decode worker that let a chunk go refuses
// the bundle (NOT_FOUND), and the prefill worker forgets what it knew of it and sends the
// bundle whole. Bounded per decode worker (the oldest names are forgotten). Thread-safe.
#ifndef YOCO_LIB_WORKERS_SHIPPED_CHUNKS_H_
#define YOCO_LIB_WORKERS_SHIPPED_CHUNKS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "lib/engine/state_bundle.h"

namespace yoco {

class ShippedChunks {
 public:
  // `per_peer`: the most names remembered per decode worker.
  explicit ShippedChunks(size_t per_peer = size_t{1} << 20) : per_peer_(per_peer) {}

  // How many of `names`, from the first on, were sent to `peer`.
  int64_t LeadingHeld(const std::string& peer, absl::Span<const ChunkName> names) const;
  // `names` reached `peer`.
  void Record(const std::string& peer, absl::Span<const ChunkName> names);
  // `peer` holds none of what it was sent (it refused a bundle, or restarted).
  void Forget(const std::string& peer);

 private:
  struct Peer {
    std::set<ChunkName> names;
    std::deque<ChunkName> order;  // oldest first
  };
  const size_t per_peer_;
  mutable absl::Mutex mu_;
  std::map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_SHIPPED_CHUNKS_H_
