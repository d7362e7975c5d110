// Server reflection v1 (what grpcurl asks first) on a server started like every service: it
// lists the services and answers a symbol with its file and the files that file imports.
#include "lib/rpc/reflection_v1.h"

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <set>

#include "lib/rpc/grpc_server.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {
namespace {

namespace refl = grpc::reflection::v1;

TEST(ReflectionV1Test, ListsServicesAndAnswersSymbolsWithTheirImports) {
  v1::DecodeWorker::Service service;  // unimplemented methods: only its name matters here
  int port = 0;
  auto server = StartGrpcServer("127.0.0.1:0", {&service}, "yoco.v1.DecodeWorker", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = refl::ServerReflection::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);

  refl::ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  refl::ServerReflectionResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  std::set<std::string> names;
  for (const auto& s : answer.list_services_response().service()) names.insert(s.name());
  EXPECT_TRUE(names.count("yoco.v1.DecodeWorker")) << answer.DebugString();
  EXPECT_TRUE(names.count("grpc.reflection.v1.ServerReflection")) << answer.DebugString();

  refl::ServerReflectionRequest symbol;
  symbol.set_file_containing_symbol("yoco.v1.DecodeWorker");
  ASSERT_TRUE(stream->Write(symbol));
  ASSERT_TRUE(stream->Read(&answer));
  std::set<std::string> files;
  for (const std::string& bytes : answer.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    files.insert(file.name());
  }
  // worker.proto imports yoco.proto (SamplingParams): both, the import first sent with it.
  EXPECT_EQ(files, (std::set<std::string>{"yoco/v1/worker.proto", "yoco/v1/yoco.proto"}));

  refl::ServerReflectionRequest unknown;
  unknown.set_file_containing_symbol("no.such.Symbol");
  ASSERT_TRUE(stream->Write(unknown));
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(answer.original_request().file_containing_symbol(), "no.such.Symbol");

  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  (*server)->Shutdown();
}

}  // namespace
}  // namespace yoco
