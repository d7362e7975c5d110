// SIGTERM to an idle worker that a health watcher (a load balancer, a service mesh) streams from:
// the worker reports NOT_SERVING, ends the watch and exits at once instead of waiting its whole
// drain period for a stream that never ends by itself.
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

class ClusterDrainTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void ExpectExitAtOnce(Role role);
  const std::string dir_ = MakeTestDir();
};

void ClusterDrainTest::ExpectExitAtOnce(Role role) {
  auto worker = Service::Start(role,
                               {"--model", TinyModelDir(), "--tls", "tcp", "--net-devices", "lo",
                                "--threads", "1", "--drain-seconds", "30"},
                               dir_ + "/worker");
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string service =
      role == Role::kDecode ? "yoco.v1.DecodeWorker" : "yoco.v1.PrefillWorker";
  auto watcher = ServiceProcess::Start(
      BinaryPath("yoco-cli"),
      {"--router", (*worker)->address(), "health", "--service", service, "--watch"},
      dir_ + "/watch");
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains((*watcher)->Log(), "SERVING\n"); }, absl::Seconds(30)))
      << (*watcher)->Log();

  const absl::Time start = absl::Now();
  absl::StatusOr<int> exit_status = (*worker)->process().Terminate(absl::Seconds(20));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, 0) << (*worker)->process().LogTail();
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_TRUE((*watcher)->Wait(absl::Seconds(10)).ok());
  EXPECT_TRUE(absl::StrContains((*watcher)->Log(), "\nNOT_SERVING\n")) << (*watcher)->Log();
}

TEST_F(ClusterDrainTest, AnIdleDecodeWorkerWithAWatcherExitsAtOnce) {
  ExpectExitAtOnce(Role::kDecode);
}
TEST_F(ClusterDrainTest, AnIdlePrefillWorkerWithAWatcherExitsAtOnce) {
  ExpectExitAtOnce(Role::kPrefill);
}

}  // namespace
}  // namespace yoco::testing
