// gRPC server start-up.
#include "lib/rpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/rpc/health_watchers.h"
#include "lib/rpc/quiet_protobuf_logs.h"
#include "lib/rpc/reflection_v1.h"
#include "lib/rpc/unparseable_requests.h"

namespace yoco {
namespace {

// Reflection v1 beside gRPC's v1alpha (what the library serves), one per server: a service
// must outlive its server, which the caller owns, so each is kept until the process ends, as
// the library keeps its own.
grpc::Service* KeptForTheProcess(std::unique_ptr<ReflectionV1> service) {
  static absl::Mutex mu;
  static std::deque<std::unique_ptr<ReflectionV1>>* kept =
      new std::deque<std::unique_ptr<ReflectionV1>>;
  absl::MutexLock lock(&mu);
  kept->push_back(std::move(service));
  return kept->back().get();
}

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services,
    const std::string& readiness_service, int* bound_port,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  QuietProtobufLogs();  // a client must not be able to write a log line per request
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials ? credentials : grpc::InsecureServerCredentials(),
                           bound_port);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.RegisterService(KeptForTheProcess(std::make_unique<ReflectionV1>(std::vector<std::string>{
      readiness_service, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
      "grpc.reflection.v1.ServerReflection"})));
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(HealthWatchTracker());
  interceptors.push_back(UnparseableRequestStatus());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || *bound_port == 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
    health->SetServingStatus(readiness_service, true);
  }
  return server;
}

}  // namespace yoco
