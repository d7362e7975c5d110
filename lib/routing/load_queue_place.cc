// A request's place in the load queue; see the header for the races it settles.
#include "lib/routing/load_queue_place.h"

namespace yoco {

absl::Status LoadQueuePlace::Wait(const SchedulingClass& c) {
  uint64_t first;
  {
    absl::MutexLock lock(&mu_);
    answered_ = false;
    first = first_;
  }
  absl::StatusOr<uint64_t> place = queue_.Push(
      c, [this](bool turn) { Answer(turn); }, first);
  if (!place.ok()) return place.status();
  // Cancelled before the place was known here, Cancel could not take it out: this does.
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    if (first_ == 0) first_ = *place;
    if (!answered_) {
      waiting_ = *place;
      cancelled = cancelled_;
    }
  }
  if (cancelled && queue_.Remove(*place)) Answer(true);
  return absl::OkStatus();
}

void LoadQueuePlace::Cancel() {
  uint64_t waiting;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    waiting = waiting_;
  }
  if (waiting != 0 && queue_.Remove(waiting)) Answer(true);
}

bool LoadQueuePlace::waited() const {
  absl::MutexLock lock(&mu_);
  return first_ != 0;
}

void LoadQueuePlace::Answer(bool turn) {
  {
    absl::MutexLock lock(&mu_);
    waiting_ = 0;
    answered_ = true;
  }
  on_room_(turn);
}

}  // namespace yoco
