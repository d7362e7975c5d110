// Signals are taken synchronously with sigwait, so no handler runs in an arbitrary thread.
#include "lib/rpc/graceful_shutdown.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "lib/log/log.h"
#include "lib/rpc/health_watchers.h"
#include "lib/trace/trace_flags.h"

namespace yoco {
namespace {

std::atomic<bool> draining{false};

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ServeUntilTerminated(grpc::Server& server, absl::Duration drain) {
  const sigset_t set = TerminationSignals();
  int signal = 0;
  sigwait(&set, &signal);
  draining = true;
  LogInfo(absl::StrCat(signal == SIGTERM ? "SIGTERM" : "SIGINT", ", draining"))
      .With("up_to", absl::FormatDuration(drain));
  if (grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService()) {
    health->Shutdown();  // NOT_SERVING for every service name, to checks and watchers
  }
  // New calls are refused from here on; calls in flight get until the deadline. Health watches
  // would hold the server for all of it: they end once NOT_SERVING has had a moment to go out.
  std::thread shutdown([&server, drain] {
    server.Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(drain));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EndHealthWatches();
  shutdown.join();
  FlushTraces();  // the drained calls' spans
  LogInfo("stopped");
}

bool Draining() { return draining.load(); }

}  // namespace yoco
