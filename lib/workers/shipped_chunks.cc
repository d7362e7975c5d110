// ShippedChunks: a bounded set of names per decode worker.
#include "lib/workers/shipped_chunks.h"

#include "absl/synchronization/mutex.h"

namespace yoco {

int64_t ShippedChunks::LeadingHeld(const std::string& peer,
                                   absl::Span<const ChunkName> names) const {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return 0;
  int64_t n = 0;
  while (n < static_cast<int64_t>(names.size()) && it->second.names.count(names[n]) > 0) ++n;
  return n;
}

void ShippedChunks::Record(const std::string& peer, absl::Span<const ChunkName> names) {
  absl::MutexLock lock(&mu_);
  Peer& p = peers_[peer];
  for (const ChunkName& name : names) {
    if (!p.names.insert(name).second) continue;
    p.order.push_back(name);
    if (p.order.size() > per_peer_) {
      p.names.erase(p.order.front());
      p.order.pop_front();
    }
  }
}

void ShippedChunks::Forget(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  peers_.erase(peer);
}

}  // namespace yoco
