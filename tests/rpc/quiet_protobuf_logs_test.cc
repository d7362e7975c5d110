// A client that sends request after request with invalid UTF-8 in string fields makes protobuf
// log each one; with QuietProtobufLogs at most one line a second gets out.
#include "lib/rpc/quiet_protobuf_logs.h"

#include <gtest/gtest.h>

#include "yoco/v1/yoco.pb.h"

namespace yoco {
namespace {

TEST(QuietProtobufLogsTest, AFloodOfInvalidUtf8RequestsLogsAlmostNothing) {
  QuietProtobufLogs();
  v1::GenerateRequest request;
  request.set_text("valid");
  std::string bytes = request.SerializeAsString();
  bytes[bytes.size() - 1] = '\xff';  // the text's last byte: no longer UTF-8
  const uint64_t before = SuppressedProtobufLogs();
  for (int i = 0; i < 1000; ++i) {
    v1::GenerateRequest parsed;
    parsed.ParseFromString(bytes);  // logs (and, in proto3, fails)
  }
  // A slow machine may let a second line out; never more than a few.
  EXPECT_GE(SuppressedProtobufLogs() - before, 995u);
}

}  // namespace
}  // namespace yoco
