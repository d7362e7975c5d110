// BundlePartStore: the bundle parts a decode worker received ahead of their bundle, held until
// the bundle claims them (Join) or they are too old (an aborted send). Keyed by the sending
// transport's id and the sender's parts id, so one sender's parts are never another's.
// Thread-safe.
#ifndef YOCO_LIB_WORKERS_BUNDLE_PART_STORE_H_
#define YOCO_LIB_WORKERS_BUNDLE_PART_STORE_H_

#include <cstdint>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/engine/bundle_part.h"
#include "lib/engine/state_bundle.h"

namespace yoco {

class BundlePartStore {
 public:
  // Keeps a verified part of `bytes` serialised bytes. INVALID_ARGUMENT for an index already
  // held.
  absl::Status Put(uint64_t sender, BundlePart part, int64_t bytes, absl::Time now);

  // Puts the parts a parsed bundle from `sender` names in front of the rows it carries and
  // takes them out of the store; returns their serialised bytes. NOT_FOUND when one is missing
  // (expired, or its send failed), INVALID_ARGUMENT when they do not line up with the bundle;
  // either way the bundle's parts are dropped and the sender sends the bundle whole.
  absl::StatusOr<int64_t> Join(uint64_t sender, StateBundle* bundle);

  // Drops the parts of every bundle whose last part arrived before `cutoff`.
  void DropArrivedBefore(absl::Time cutoff);

  int64_t bytes() const;  // serialised bytes of the parts held

 private:
  struct Parts {
    std::map<int32_t, BundlePart> by_index;
    int64_t bytes = 0;
    absl::Time last_arrival;
  };
  using Key = std::pair<uint64_t, uint64_t>;  // sender, parts id

  mutable absl::Mutex mu_;
  std::map<Key, Parts> parts_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_BUNDLE_PART_STORE_H_
