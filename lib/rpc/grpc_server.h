// Starting a gRPC server the way every YOCO service does: the given services, gRPC health
// checking and server reflection, bounded message sizes. Health has two names: "" says the
// process answers (liveness), `readiness_service` (the role's gRPC service name, e.g.
// yoco.v1.DecodeWorker) says it takes requests (readiness; NOT_SERVING once it drains).
#ifndef YOCO_LIB_RPC_GRPC_SERVER_H_
#define YOCO_LIB_RPC_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yoco {

// Largest request or response message a service accepts (prompts of millions of tokens fit).
inline constexpr int kMaxGrpcMessageBytes = 64 << 20;

// Binds `listen` (HOST:PORT; port 0 picks one) and starts serving, over `credentials`
// (MakeServerCredentials; null: plaintext). `bound_port` receives the port actually bound.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services,
    const std::string& readiness_service, int* bound_port,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

}  // namespace yoco

#endif  // YOCO_LIB_RPC_GRPC_SERVER_H_
