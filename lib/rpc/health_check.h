// grpc.health.v1 from the client side: Check as a generic call, its messages encoded by hand so
// that clients (yoco-cli, the test cluster) need no generated health code. Request: field 1, the
// service name. Response: field 1, the status enum.
#ifndef YOCO_LIB_RPC_HEALTH_CHECK_H_
#define YOCO_LIB_RPC_HEALTH_CHECK_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace yoco {

// The values of grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class HealthState { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN".
const char* HealthStateName(HealthState state);

// The request message for `service` ("" is the whole server). At most 127 bytes of name.
grpc::ByteBuffer HealthCheckRequest(const std::string& service);

// The state a response message carries; anything unreadable is kUnknown (as is an empty
// message: proto3 leaves a zero enum out).
HealthState ParseHealthCheckResponse(const grpc::ByteBuffer& response);

// One Health/Check call on `channel`. The call's error when it fails (UNAVAILABLE while nothing
// listens, DEADLINE_EXCEEDED after `timeout`).
absl::StatusOr<HealthState> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                        const std::string& service, absl::Duration timeout);

}  // namespace yoco

#endif  // YOCO_LIB_RPC_HEALTH_CHECK_H_
