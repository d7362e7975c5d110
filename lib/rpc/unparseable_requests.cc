// gRPC hands interceptors a null request at POST_RECV_MESSAGE when the bytes did not parse; the
// status it then sends passes PRE_SEND_STATUS, where it can be replaced.
#include "lib/rpc/unparseable_requests.h"

#include <grpcpp/grpcpp.h>

#include <string>

namespace yoco {
namespace {

class Interceptor : public grpc::experimental::Interceptor {
 public:
  explicit Interceptor(const char* method) : method_(method != nullptr ? method : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparseable_ = true;
    }
    // Unary methods answer an unparseable request INTERNAL, callback server-streaming ones
    // (Generate, Decode) UNIMPLEMENTED, both without a message.
    const auto code =
        unparseable_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)
            ? methods->GetSendStatus().error_code()
            : grpc::StatusCode::OK;
    if (code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "the request message of " + method_ +
              " does not parse (not that method's message, or a string field that is not "
              "UTF-8: send bytes as UTF-8 text or use token ids)"));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool unparseable_ = false;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(info->method());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> UnparseableRequestStatus() {
  return std::make_unique<Factory>();
}

}  // namespace yoco
