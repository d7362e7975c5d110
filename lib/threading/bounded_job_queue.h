// BoundedJobQueue: one background thread running best-effort jobs in order. When the queue is
// full new jobs are dropped (and counted) rather than queued without bound: the jobs it is for
// (extending prefix-cache snapshots after a request) are optimisations, never needed for
// correctness. The destructor runs the jobs already queued, then joins.
#ifndef YOCO_LIB_THREADING_BOUNDED_JOB_QUEUE_H_
#define YOCO_LIB_THREADING_BOUNDED_JOB_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"

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
  bool Post(std::function<void()> job) {
    {
      absl::MutexLock lock(&mu_);
      if (jobs_.size() >= capacity_) {
        ++dropped_;
        return false;
      }
      jobs_.push_back(std::move(job));
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
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
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
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_BOUNDED_JOB_QUEUE_H_
