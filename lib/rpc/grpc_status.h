// Conversions between absl::Status (libraries) and grpc::Status (services); the codes map one
// to one.
#ifndef YOCO_LIB_RPC_GRPC_STATUS_H_
#define YOCO_LIB_RPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace yoco {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace yoco

#endif  // YOCO_LIB_RPC_GRPC_STATUS_H_
