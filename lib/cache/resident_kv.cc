// ResidentKv: chunks by name, referenced by the sequences that use them.
#include "lib/cache/resident_kv.h"

#include <algorithm>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace yoco {

bool ResidentKv::InUse(const Entry& e) {
  return e.k.chunk_holders(0) > 1 || e.v.chunk_holders(0) > 1;
}

absl::Status ResidentKv::Attach(StateBundle* bundle) {
  if (bundle->resident_chunks == 0) return absl::OkStatus();
  SequenceState& state = bundle->state;
  const int64_t C = KvRows::kChunkRows;
  KvRows k(state.shared_k.dtype(), state.shared_k.width(), state.shared_k.layout());
  KvRows v(state.shared_v.dtype(), state.shared_v.width(), state.shared_v.layout());
  k.Reserve(state.position);
  v.Reserve(state.position);
  {
    absl::MutexLock lock(&mu_);
    for (int64_t i = 0; i < bundle->resident_chunks; ++i) {
      auto it = entries_.find(bundle->chunk_names[i]);
      if (it == entries_.end() || it->second.k.dtype() != k.dtype() ||
          it->second.k.width() != k.width()) {
        ++stats_.missing;
        const ChunkName& name = bundle->chunk_names[i];
        return absl::NotFoundError(absl::StrCat(
            "K/V chunk ", i, " of ", bundle->resident_chunks, " left out of the bundle (",
            absl::BytesToHexString(
                absl::string_view(reinterpret_cast<const char*>(name.data()), name.size())),
            ") is not held here; send the bundle whole"));
      }
      it->second.last_use = ++clock_;
      k.AppendRows(it->second.k, 0, C);
      v.AppendRows(it->second.v, 0, C);
    }
    stats_.attached += bundle->resident_chunks;
  }
  const int64_t carried = state.shared_k.rows();
  k.AppendRows(state.shared_k, 0, carried);
  v.AppendRows(state.shared_v, 0, carried);
  state.shared_k = std::move(k);
  state.shared_v = std::move(v);
  bundle->resident_chunks = 0;
  return absl::OkStatus();
}

void ResidentKv::Keep(const StateBundle& bundle) {
  const SequenceState& state = bundle.state;
  const int64_t C = KvRows::kChunkRows;
  const int64_t named = std::min<int64_t>(bundle.chunk_names.size(), state.shared_k.rows() / C);
  absl::MutexLock lock(&mu_);
  for (int64_t i = 0; i < named; ++i) {
    Entry& e = entries_[bundle.chunk_names[i]];
    if (e.k.rows() == 0) {
      e.k = KvRows(state.shared_k.dtype(), state.shared_k.width(), state.shared_k.layout());
      e.v = KvRows(state.shared_v.dtype(), state.shared_v.width(), state.shared_v.layout());
      e.k.AppendRows(state.shared_k, i * C, C);  // shared with the bundle, not copied
      e.v.AppendRows(state.shared_v, i * C, C);
    }
    e.last_use = ++clock_;
  }
  EvictLocked();
}

void ResidentKv::EvictLocked() {
  std::vector<std::pair<uint64_t, ChunkName>> idle;
  int64_t idle_bytes = 0;
  for (const auto& [name, e] : entries_) {
    if (InUse(e)) continue;
    idle.emplace_back(e.last_use, name);
    idle_bytes += e.k.chunk_bytes() + e.v.chunk_bytes();
  }
  if (idle_bytes <= budget_bytes_) return;
  std::sort(idle.begin(), idle.end());
  for (const auto& [last_use, name] : idle) {
    if (idle_bytes <= budget_bytes_) break;
    auto it = entries_.find(name);
    idle_bytes -= it->second.k.chunk_bytes() + it->second.v.chunk_bytes();
    entries_.erase(it);
    ++stats_.evictions;
  }
}

ResidentKvStats ResidentKv::stats() const {
  absl::MutexLock lock(&mu_);
  ResidentKvStats s = stats_;
  for (const auto& [name, e] : entries_) {
    const int64_t bytes = e.k.chunk_bytes() + e.v.chunk_bytes();
    ++s.chunks;
    s.bytes += bytes;
    if (!InUse(e)) s.idle_bytes += bytes;
  }
  return s;
}

}  // namespace yoco
