// PeriodicTask: a function run every `interval` on a thread of its own, from one interval after
// construction until the task is destroyed. Destruction wakes the thread at once (a long
// interval never delays shutdown), lets a run in progress finish, and joins. Own it as the last
// member of the class whose members the function uses, so it stops before they go.
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
        while (!stop_ && absl::Now() < next) cv_.WaitWithDeadline(&mu_, next);
        if (stop_) return;
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
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_PERIODIC_TASK_H_
