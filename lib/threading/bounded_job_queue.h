// BoundedJobQueue: one background thread running jobs one at a time, in FairOrder of the class
// each was posted with (arrival order when all share one: priority, then tenants by weight).
// When the queue is full new jobs are refused (and counted) rather than queued without bound:
// the jobs it is for are optimisations (extending prefix-cache snapshots after a request) or
// work whose caller can answer "busy" (a decode worker's local prefills). The destructor runs
// the jobs already queued, then joins.
#ifndef YOCO_LIB_THREADING_BOUNDED_JOB_QUEUE_H_
#define YOCO_LIB_THREADING_BOUNDED_JOB_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "lib/scheduling/fair_order.h"
#include "lib/scheduling/scheduling_class.h"

namespace yoco {

class BoundedJobQueue {
 public:
  explicit BoundedJobQueue(size_t capacity) : capacity_(capacity), thread_([this] { Run(); }) {}
  ~BoundedJobQueue() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  BoundedJobQueue(const BoundedJobQueue&) = delete;
  BoundedJobQueue& operator=(const BoundedJobQueue&) = delete;

  // False (and the job dropped) when the queue is full.
  bool Post(std::function<void()> job, const SchedulingClass& c = {}) {
    {
      absl::MutexLock lock(&mu_);
      if (jobs_.size() >= capacity_) {
        ++dropped_;
        return false;
      }
      const uint64_t id = next_id_++;
      jobs_[id] = std::move(job);
      order_.Add(id, c);
    }
    cv_.SignalAll();
    return true;
  }

  uint64_t dropped() const { return dropped_.load(); }
  // Jobs queued or running.
  size_t pending() {
    absl::MutexLock lock(&mu_);
    return jobs_.size() + (running_ ? 1 : 0);
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (true) {
      while (!stop_ && jobs_.empty()) cv_.Wait(&mu_);
      if (jobs_.empty()) return;  // stopping, and nothing left
      const uint64_t id = *order_.Peek();
      order_.Pop();
      std::function<void()> job = std::move(jobs_[id]);
      jobs_.erase(id);
      running_ = true;
      mu_.Unlock();
      job();
      mu_.Lock();
      running_ = false;
    }
  }

  const size_t capacity_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<uint64_t, std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);  // by id
  FairOrder order_ ABSL_GUARDED_BY(mu_);                                 // of jobs_'s ids
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_BOUNDED_JOB_QUEUE_H_
