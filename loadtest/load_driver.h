// LoadDriver: sends a workload's requests to the router's Generate API and measures each one.
// Open loop (arrivals at a rate, Poisson or constant, whatever the server's pace) or closed loop
// (a fixed number of requests in flight). Every stream is a gRPC callback-API call (or, against
// an HTTP endpoint, an asynchronous HTTP stream), so one process holds thousands of them without
// a thread each.
#ifndef YOCO_LOADTEST_LOAD_DRIVER_H_
#define YOCO_LOADTEST_LOAD_DRIVER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "loadtest/http_completion.h"
#include "loadtest/request_record.h"
#include "loadtest/workload.h"

namespace yoco {

enum class Arrivals { kPoisson, kConstant };

struct LoadOptions {
  // > 0: closed loop with this many requests (chat: sessions) in flight. Otherwise open loop:
  // `rate` requests (chat: sessions) per second, or a replayed file's own arrival times.
  int concurrency = 0;
  double rate = 0;
  Arrivals arrivals = Arrivals::kPoisson;
  uint64_t requests = 100;   // the run's size (0: bounded by `duration` only)
  uint64_t first_index = 0;  // the workload's request indices start here (sweep steps differ)
  absl::Duration duration = absl::InfiniteDuration();  // no request starts after this
  absl::Duration timeout = absl::Seconds(120);         // each request's deadline
  std::string cache_salt;
  std::string bearer_token;  // sent as "authorization: Bearer ..." when set
  uint64_t seed = 0;         // arrival times and each request's sampling seed
  float temperature = 0;
  bool progress = true;  // a line per second on stderr
  // Set: the requests go to this OpenAI-compatible server's streamed /v1/completions instead
  // of the router's gRPC API (pre-caching and chat sessions need the gRPC API).
  std::optional<HttpEndpoint> http;
};

class LoadDriver {
 public:
  LoadDriver(std::shared_ptr<grpc::Channel> channel, const Workload& workload, LoadOptions options);
  ~LoadDriver();

  // Pre-caches the workload's documents (rag), each under the run's salt.
  absl::Status Precache(bool pin);

  // Runs the load; returns every request's record in index order and the run's duration (from
  // the first request sent to the last one finished).
  std::vector<RequestRecord> Run(double* duration_s);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace yoco

#endif  // YOCO_LOADTEST_LOAD_DRIVER_H_
