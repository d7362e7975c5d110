// grpc.health.v1 Check, hand-encoded.
#include "lib/rpc/health_check.h"

#include <grpcpp/generic/generic_stub.h>

#include <future>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/rpc/grpc_status.h"

namespace yoco {

const char* HealthStateName(HealthState state) {
  static const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  return kNames[static_cast<int>(state)];
}

grpc::ByteBuffer HealthCheckRequest(const std::string& service) {
  std::string bytes;
  if (!service.empty()) bytes = std::string{0x0a, static_cast<char>(service.size())} + service;
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

HealthState ParseHealthCheckResponse(const grpc::ByteBuffer& response) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  const int status = bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
  return status >= 0 && status <= 3 ? static_cast<HealthState>(status) : HealthState::kUnknown;
}

absl::StatusOr<HealthState> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                        const std::string& service, absl::Duration timeout) {
  if (service.size() > 127) return absl::InvalidArgumentError("service name over 127 bytes");
  grpc::GenericStub stub(channel);
  grpc::ByteBuffer request = HealthCheckRequest(service), response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status st) { done.set_value(st); });
  const grpc::Status st = done.get_future().get();
  if (!st.ok()) return FromGrpcStatus(st);
  return ParseHealthCheckResponse(response);
}

}  // namespace yoco
