// PeriodicTask: a function run every `interval` on a thread of its own, from one interval after
// construction until the task is destroyed. Destruction wakes the thread at once (a long
// interval never delays shutdown), lets a run in progress finish, and joins. Own it as the last
// member of the class whose members the function uses, so it stops before they go.
#ifndef YOCO_LIB_THREADING_PERIODIC_TASK_H_
#define YOCO_LIB_THREADING_PERIODIC_TASK_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace yoco {

class PeriodicTask {
 public:
  // A zero or negative interval starts no thread: the task never runs.
  PeriodicTask(absl::Duration interval, std::function<void()> run) {
    if (interval <= absl::ZeroDuration()) return;
    thread_ = std::thread([this, interval, run = std::move(run)] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, absl::ToChronoNanoseconds(interval), [this] { return stop_; })) {
        lock.unlock();
        run();
        lock.lock();
      }
    });
  }
  ~PeriodicTask() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_PERIODIC_TASK_H_
