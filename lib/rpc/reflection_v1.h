// ReflectionV1: grpc.reflection.v1.ServerReflection (the version grpcurl and grpc_cli ask for
// first), answered from the protobuf descriptors linked into the process, as gRPC's own v1alpha
// service answers. Debian's gRPC 1.51 serves only v1alpha; StartGrpcServer registers both.
#ifndef YOCO_LIB_RPC_REFLECTION_V1_H_
#define YOCO_LIB_RPC_REFLECTION_V1_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace yoco {

class ReflectionV1 final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the full names ListServices reports.
  explicit ReflectionV1(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace yoco

#endif  // YOCO_LIB_RPC_REFLECTION_V1_H_
