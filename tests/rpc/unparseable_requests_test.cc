// A request whose bytes do not parse as the method's message, unary or server-streaming, gets
// INVALID_ARGUMENT with a message (gRPC's own answer is INTERNAL or UNIMPLEMENTED with none),
// from a server started like every service.
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

// Generate on the callback API, as the router serves it: one token, then OK.
class GenerateOnly : public v1::Yoco::WithCallbackMethod_Generate<v1::Yoco::Service> {
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext*,
                                                           const v1::GenerateRequest*) override {
    class OneToken : public grpc::ServerWriteReactor<v1::GenerateResponse> {
     public:
      OneToken() {
        response_.mutable_token()->set_id(7);
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      v1::GenerateResponse response_;
    };
    return new OneToken;
  }
};

// A server-streaming call with raw request bytes: its status and how many messages came.
std::pair<grpc::Status, int> StreamWithBytes(int port, const std::string& method,
                                             const std::string& bytes) {
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(&context, method, &cq);
  void* tag;
  bool ok;
  auto next = [&] { return cq.Next(&tag, &ok) && ok; };
  call->StartCall(reinterpret_cast<void*>(1));
  next();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  next();
  int messages = 0;
  for (;;) {
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(3));
    if (!next()) break;
    ++messages;
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return {status, messages};
}

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

TEST(UnparseableRequestsTest, StreamingMethodsAreInvalidArgumentWithAMessage) {
  GenerateOnly service;
  int port = 0;
  auto server = StartGrpcServer("127.0.0.1:0", {&service}, "yoco.v1.Yoco", &port);
  ASSERT_TRUE(server.ok()) << server.status();

  v1::GenerateRequest good;
  good.set_request_id("fine");
  const auto [good_status, good_messages] =
      StreamWithBytes(port, "/yoco.v1.Yoco/Generate", good.SerializeAsString());
  EXPECT_TRUE(good_status.ok()) << good_status.error_message();
  EXPECT_EQ(good_messages, 1);

  std::string not_utf8 = good.SerializeAsString();
  not_utf8.back() = '\xff';
  for (const std::string& bytes : {not_utf8, std::string("\xff\xff\xff\xff\x0f")}) {
    const auto [st, messages] = StreamWithBytes(port, "/yoco.v1.Yoco/Generate", bytes);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("/yoco.v1.Yoco/Generate"), std::string::npos)
        << st.error_message();
    EXPECT_EQ(messages, 0);
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace yoco
