// PeriodicTask: a function run every `interval` on a thread of its own, from one interval after
// construction until the task is destroyed, and at once when RunSoon asks. Destruction wakes the
// thread at once (a long interval never delays shutdown), lets a run in progress finish, and
// joins. Own it as the last member of the class whose members the function uses, so it stops
// before they go.
#ifndef YOCO_LIB_THREADING_PERIODIC_TASK_H_
#define YOCO_LIB_THREADING_PERIODIC_TASK_H_

#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace yoco {

class PeriodicTask {
 public:
  // A zero or negative interval starts no thread: the task never runs.
  PeriodicTask(absl::Duration interval, std::function<void()> run) {
    if (interval <= absl::ZeroDuration()) return;
    thread_ = std::thread([this, interval, run = std::move(run)] {
      absl::MutexLock lock(&mu_);
      while (true) {
        const absl::Time next = absl::Now() + interval;
        while (!stop_ && !soon_ && absl::Now() < next) cv_.WaitWithDeadline(&mu_, next);
        if (stop_) return;
        soon_ = false;
        mu_.Unlock();
        run();
        mu_.Lock();
      }
    });
  }
  ~PeriodicTask() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    if (thread_.joinable()) thread_.join();
  }
  // The next run starts now rather than at its time (or right after the one in progress): for
  // callers that must not block on the function themselves. Asks made while a run waits to
  // start are one run.
  void RunSoon() {
    {
      absl::MutexLock lock(&mu_);
      soon_ = true;
    }
    cv_.Signal();
  }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool soon_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_PERIODIC_TASK_H_
