// A request whose bytes do not parse as the method's message gets INVALID_ARGUMENT with a
// message (gRPC's own answer is INTERNAL with none), from a server started like every service.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>

#include "lib/rpc/grpc_server.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {
namespace {

class TokenizeOnly : public v1::Yoco::Service {
  grpc::Status Tokenize(grpc::ServerContext*, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override {
    response->add_ids(static_cast<int32_t>(request->text().size()));
    return grpc::Status::OK;
  }
};

grpc::Status CallWithBytes(int port, const std::string& bytes) {
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/yoco.v1.Yoco/Tokenize", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status st) { done.set_value(st); });
  return done.get_future().get();
}

TEST(UnparseableRequestsTest, AreInvalidArgumentWithAMessage) {
  TokenizeOnly service;
  int port = 0;
  auto server = StartGrpcServer("127.0.0.1:0", {&service}, "yoco.v1.Yoco", &port);
  ASSERT_TRUE(server.ok()) << server.status();

  v1::TokenizeRequest good;
  good.set_text("fine");
  EXPECT_TRUE(CallWithBytes(port, good.SerializeAsString()).ok());

  std::string not_utf8 = good.SerializeAsString();
  not_utf8.back() = '\xff';
  const std::string garbage = "\xff\xff\xff\xff\x0f";  // a truncated varint tag
  for (const std::string& bytes : {not_utf8, garbage}) {
    const grpc::Status st = CallWithBytes(port, bytes);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("/yoco.v1.Yoco/Tokenize"), std::string::npos)
        << st.error_message();
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace yoco
