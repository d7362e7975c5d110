// Graceful shutdown for the services: on SIGTERM (what Kubernetes sends) or SIGINT, a service
// stops taking new calls and reports NOT_SERVING, lets the calls in flight finish for up to a
// drain period (a decode stream runs to its end instead of being cut and retried elsewhere),
// cancels what is left, and returns so that main can release everything in order.
#ifndef YOCO_LIB_RPC_GRACEFUL_SHUTDOWN_H_
#define YOCO_LIB_RPC_GRACEFUL_SHUTDOWN_H_

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"

namespace yoco {

// Call first thing in main, before any thread starts: threads inherit the blocked signals, so
// only ServeUntilTerminated ever sees them.
void BlockTerminationSignals();

// Waits for SIGTERM or SIGINT, then drains `server` for up to `drain` and shuts it down.
void ServeUntilTerminated(grpc::Server& server, absl::Duration drain);

// True from the termination signal on (the services export it as yoco_service_draining).
bool Draining();

}  // namespace yoco

#endif  // YOCO_LIB_RPC_GRACEFUL_SHUTDOWN_H_
