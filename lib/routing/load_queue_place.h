// LoadQueuePlace: one request's place in the LoadWaitQueue across all its waits for room. A
// request woken that finds no room waits again with its first place (it keeps its turn within
// its tenant), and a request whose client goes away leaves the queue at once instead of in its
// turn. The wake may come on another thread at any moment, including before Wait has returned
// and while Cancel runs; this class is where those races are settled.
#ifndef YOCO_LIB_ROUTING_LOAD_QUEUE_PLACE_H_
#define YOCO_LIB_ROUTING_LOAD_QUEUE_PLACE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "lib/routing/load_wait_queue.h"
#include "lib/scheduling/scheduling_class.h"

namespace yoco {

class LoadQueuePlace {
 public:
  // `on_room` is the answer to each successful Wait: exactly once per Wait, with true when it is
  // the request's turn (or it was cancelled: the request then ends itself) and false when a
  // newcomer of a less busy tenant took its place.
  LoadQueuePlace(LoadWaitQueue& queue, LoadWaitQueue::Wake on_room)
      : queue_(queue), on_room_(std::move(on_room)) {}

  // Queues the request of class `c`. On an error (the queue is full) it is not queued and
  // `on_room` does not run. `on_room` may run before Wait returns.
  absl::Status Wait(const SchedulingClass& c);

  // The client went away: from now on the request leaves the queue as soon as it is in it, and
  // then `on_room(true)` runs on the thread that took it out (this one, or Wait's).
  void Cancel();

  // Whether the request has ever been queued.
  bool waited() const;

 private:
  void Answer(bool turn);

  LoadWaitQueue& queue_;
  const LoadWaitQueue::Wake on_room_;
  mutable absl::Mutex mu_;
  uint64_t waiting_ ABSL_GUARDED_BY(mu_) = 0;   // the place while queued
  bool answered_ ABSL_GUARDED_BY(mu_) = false;  // on_room ran for the last Wait
  uint64_t first_ ABSL_GUARDED_BY(mu_) = 0;     // kept across waits, so the turn is kept
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_LOAD_QUEUE_PLACE_H_
