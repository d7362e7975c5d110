// Readiness follows "can admit": NOT_SERVING while the worker says it cannot take one more
// request, SERVING again once it can; liveness ("") stays SERVING throughout.
#include "lib/rpc/readiness_reporter.h"

#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "lib/rpc/grpc_server.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {
namespace {

// grpc.health.v1.Health/Check, hand-encoded: 1 SERVING, 2 NOT_SERVING.
int HealthOf(int port, const std::string& service) {
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  std::string encoded;
  if (!service.empty()) encoded = std::string{0x0a, static_cast<char>(service.size())} + service;
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status st) { done.set_value(st); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes.size() == 2 ? bytes[1] : 0;
}

int WaitForHealth(int port, const std::string& service, int want) {
  int got = -1;
  for (int i = 0; i < 100; ++i) {
    got = HealthOf(port, service);
    if (got == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return got;
}

TEST(ReadinessReporterTest, ReadinessFollowsCanAdmit) {
  v1::Yoco::Service service;
  int port = 0;
  auto server = StartGrpcServer("127.0.0.1:0", {&service}, "yoco.v1.Yoco", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  std::atomic<bool> can_admit{true};
  {
    ReadinessReporter readiness(
        **server, "yoco.v1.Yoco", [&] { return can_admit.load(); }, absl::Milliseconds(10));
    EXPECT_EQ(WaitForHealth(port, "yoco.v1.Yoco", 1), 1);
    can_admit = false;
    EXPECT_EQ(WaitForHealth(port, "yoco.v1.Yoco", 2), 2);
    EXPECT_EQ(HealthOf(port, ""), 1);  // alive all along
    can_admit = true;
    EXPECT_EQ(WaitForHealth(port, "yoco.v1.Yoco", 1), 1);
    EXPECT_EQ(readiness.flips(), 2u);
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace yoco
