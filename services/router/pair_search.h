// PairSearch: how one Generate attempt finds its worker pair. It asks the pool for a pair that
// avoids the workers this request saw fail or refuse; when there is none it waits — for workers
// to come up or turn healthy (polled by an alarm until the attempt's wait_for_workers passes),
// or, when every pair refused for load, for room in the router's LoadWaitQueue (until the
// request's deadline or max_load_wait). Its answer is a usable pair or the status the request
// ends with. Each wait is an op of the stream's InFlightOps: a search holds no thread.
#ifndef YOCO_SERVICES_ROUTER_PAIR_SEARCH_H_
#define YOCO_SERVICES_ROUTER_PAIR_SEARCH_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>

#include "lib/routing/load_queue_place.h"
#include "lib/scheduling/scheduling_class.h"
#include "services/router/failover.h"
#include "services/router/in_flight_ops.h"
#include "services/router/request_trace.h"
#include "services/router/worker_pool.h"

namespace yoco {

class PairSearch {
 public:
  struct Callbacks {
    std::function<void(const WorkerPair&)> found;  // usable
    std::function<void(const grpc::Status&)> ended;
    // An op of `ops` ended (the owner may delete itself, and this search with it).
    std::function<void()> end_op;
  };

  PairSearch(WorkerPool& pool, grpc::CallbackServerContext& context, InFlightOps& ops,
             RequestTrace& trace, Callbacks callbacks);

  // A new attempt's search for `want` (whose skip lists this search fills in). `if_none` is what
  // the request ends with when no pair comes; `scheduling` is its place in the load queue.
  void Start(const PairRequest& want, const SchedulingClass& scheduling,
             const grpc::Status& if_none);
  // The client went away: out of the load queue at once (a waiting alarm ends by ops' cancel).
  void Cancel() { room_.Cancel(); }

  // The attempt on `pair` ended as `f` says: the workers it blames are marked failed in the pool,
  // and this request's later searches avoid what `f` names.
  void AttemptEnded(const WorkerPair& pair, const Failover& f);

 private:
  enum class Wait { kNone, kWorkers, kRoom };

  void Choose();
  void WaitForWorkers();
  void WaitForRoom();
  void OnRoom(bool turn);  // the queue's answer: try again, or shed
  // Ends the search with `status` unless it is waiting for `expected` (a bug: INTERNAL).
  bool Waiting(Wait expected);

  WorkerPool& pool_;
  grpc::CallbackServerContext& context_;
  InFlightOps& ops_;
  RequestTrace& trace_;
  const Callbacks callbacks_;
  const std::chrono::system_clock::time_point load_wait_until_;  // the whole request's

  PairRequest want_;
  SchedulingClass scheduling_;
  grpc::Status if_none_;
  std::chrono::system_clock::time_point workers_wait_until_;  // this attempt's
  Wait wait_ = Wait::kNone;
  bool started_ = false;  // a first attempt's search has begun: the request is no newcomer
  AvoidedWorkers avoided_;
  LoadQueuePlace room_;  // in the load queue while every pair refuses for load
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_PAIR_SEARCH_H_
