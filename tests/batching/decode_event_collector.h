// DecodeEventCollector: gathers one sequence's DecodeEvents (from the batching thread) for a
// test to wait on.
#ifndef YOCO_TESTS_BATCHING_DECODE_EVENT_COLLECTOR_H_
#define YOCO_TESTS_BATCHING_DECODE_EVENT_COLLECTOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "lib/batching/decode_batcher.h"

namespace yoco::testing {

struct DecodeEventCollector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  bool finished = false;
  DecodeFinish reason = DecodeFinish::kLength;
  std::vector<int> generated;  // each event's count

  std::function<void(const DecodeEvent&)> Callback() {
    return [this](const DecodeEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      generated.push_back(e.generated);
      if (e.finished) {
        finished = true;
        reason = e.reason;
      } else {
        tokens.push_back(e.token);
      }
      cv.notify_all();
    };
  }
  bool WaitFinished(int seconds = 60) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return finished; });
  }
  size_t TokenCount() {
    std::lock_guard<std::mutex> lock(mu);
    return tokens.size();
  }
};

}  // namespace yoco::testing

#endif  // YOCO_TESTS_BATCHING_DECODE_EVENT_COLLECTOR_H_
