#include "lib/workers/bundle_part_store.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace yoco {

absl::Status BundlePartStore::Put(uint64_t sender, BundlePart part, int64_t bytes, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Parts& parts = parts_[{sender, part.parts_id}];
  const int32_t index = part.index;
  if (!parts.by_index.emplace(index, std::move(part)).second) {
    return absl::InvalidArgumentError(absl::StrCat("bundle part ", index, " arrived twice"));
  }
  parts.bytes += bytes;
  parts.last_arrival = now;
  bytes_ += bytes;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> BundlePartStore::Join(uint64_t sender, StateBundle* bundle) {
  Parts parts;
  {
    absl::MutexLock lock(&mu_);
    auto it = parts_.find({sender, bundle->parts_id});
    if (it != parts_.end()) {
      parts = std::move(it->second);
      bytes_ -= parts.bytes;
      parts_.erase(it);
    }
  }
  if (static_cast<int32_t>(parts.by_index.size()) != bundle->parts) {
    return absl::NotFoundError(absl::StrCat("the bundle's K/V came in ", bundle->parts, " parts, ",
                                            parts.by_index.size(),
                                            " of them are here; send the bundle whole"));
  }
  SequenceState& state = bundle->state;
  // The parts' rows start right after the resident chunks (put in front later).
  int64_t row = bundle->resident_chunks * KvRows::kChunkRows;
  KvRows k(state.shared_k.dtype(), state.shared_k.width(), state.shared_k.layout());
  KvRows v(state.shared_v.dtype(), state.shared_v.width(), state.shared_v.layout());
  k.Reserve(bundle->part_rows + state.shared_k.rows());
  v.Reserve(bundle->part_rows + state.shared_v.rows());
  int32_t expected_index = 0;
  for (const auto& [index, part] : parts.by_index) {
    if (index != expected_index++ || part.row0 != row || part.k.layout() != k.layout() ||
        part.v.layout() != v.layout()) {
      return absl::InvalidArgumentError(absl::StrCat("bundle part ", index, " starts at row ",
                                                     part.row0, ", the bundle's next is ", row));
    }
    // Whole chunks: shared, not copied.
    k.AppendRows(part.k, 0, part.k.rows());
    v.AppendRows(part.v, 0, part.v.rows());
    row += part.k.rows();
  }
  if (k.rows() != bundle->part_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("the bundle's parts hold ", k.rows(), " rows, it names ", bundle->part_rows));
  }
  k.AppendRows(state.shared_k, 0, state.shared_k.rows());
  v.AppendRows(state.shared_v, 0, state.shared_v.rows());
  state.shared_k = std::move(k);
  state.shared_v = std::move(v);
  bundle->parts_id = 0;
  bundle->parts = 0;
  bundle->part_rows = 0;
  return parts.bytes;
}

void BundlePartStore::DropArrivedBefore(absl::Time cutoff) {
  absl::MutexLock lock(&mu_);
  for (auto it = parts_.begin(); it != parts_.end();) {
    if (it->second.last_arrival < cutoff) {
      bytes_ -= it->second.bytes;
      it = parts_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t BundlePartStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace yoco
