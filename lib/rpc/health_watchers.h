// HealthWatchers: the open grpc.health.v1.Health/Watch calls of this process's gRPC server. A
// Watch stream never ends by itself, and a server's Shutdown waits for every call, so without
// ending them an idle service that a load balancer or mesh watches would wait out its whole
// drain period on SIGTERM. StartGrpcServer installs the tracker; the graceful shutdown ends the
// watches once NOT_SERVING is sent. One per process: each service runs one gRPC server.
#ifndef YOCO_LIB_RPC_HEALTH_WATCHERS_H_
#define YOCO_LIB_RPC_HEALTH_WATCHERS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace yoco {

// For ServerBuilder::experimental().SetInterceptorCreators: registers each Watch call for the
// call's lifetime.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> HealthWatchTracker();

// Cancels every open Watch call (its client sees CANCELLED after the statuses sent before).
// Returns how many there were.
int EndHealthWatches();

}  // namespace yoco

#endif  // YOCO_LIB_RPC_HEALTH_WATCHERS_H_
