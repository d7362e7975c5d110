// A request that reaches the router while no worker is up (a rollout, a crash, a cold start)
// waits for one within its deadline instead of failing at once; one whose deadline passes first
// fails when its deadline says. A request longer than any decode worker's state budget can hold
// is refused at once (RESOURCE_EXHAUSTED naming the budget) before any work, while one at exactly
// the longest is served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "absl/strings/str_cat.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

class ClusterRouterWaitsTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::string> WorkerFlags() const {
    return {"--model", TinyModelDir(), "--tls", "tcp", "--net-devices", "lo", "--threads", "1"};
  }
  // A router over workers at these ports, whether or not anything listens there yet. Requests
  // wait for workers as long as their deadlines allow: under a loaded ctest two workers can take
  // longer to start than the default 10 s.
  absl::StatusOr<std::unique_ptr<Service>> StartRouter(int prefill_port, int decode_port) {
    return Service::Start(
        Role::kRouter,
        {"--model", TinyModelDir(), "--prefill", absl::StrCat("127.0.0.1:", prefill_port),
         "--decode", absl::StrCat("127.0.0.1:", decode_port), "--probe-interval-ms", "200",
         "--wait-for-workers-ms", "600000"},
        dir_ + "/router");
  }

  const std::string dir_ = MakeTestDir();
};

TEST_F(ClusterRouterWaitsTest, ARequestBeforeTheWorkersWaitsForThem) {
  const int prefill_port = FreePort(), decode_port = FreePort();
  auto router = StartRouter(prefill_port, decode_port);
  ASSERT_TRUE(router.ok()) << router.status();
  auto stub = v1::Yoco::NewStub((*router)->Channel());
  const std::vector<int32_t> prompt = {0, 17, 5, 99, 254, 31, 8};
  std::future<Generated> early = std::async(
      std::launch::async, [&] { return Generate(*stub, Request(prompt, 10), absl::Seconds(30)); });

  // A short deadline with nobody there: refused within about its deadline.
  const absl::Time start = absl::Now();
  const Generated short_deadline = Generate(*stub, Request({0, 5}, 2), absl::Milliseconds(800));
  EXPECT_FALSE(short_deadline.status.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));

  absl::SleepFor(absl::Seconds(1));
  auto decode = Service::Start(Role::kDecode, WorkerFlags(), dir_ + "/decode", decode_port);
  ASSERT_TRUE(decode.ok()) << decode.status();
  std::vector<std::string> prefill_flags = WorkerFlags();
  prefill_flags.insert(prefill_flags.end(), {"--cache-mb", "0"});
  auto prefill = Service::Start(Role::kPrefill, prefill_flags, dir_ + "/prefill", prefill_port);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const Generated served = early.get();
  EXPECT_TRUE(served.status.ok()) << served.status.error_message();
  EXPECT_EQ(served.tokens, InProcessTokens(prompt, 10));
}

TEST_F(ClusterRouterWaitsTest, TooLongForEveryBudgetIsRefusedBeforeAnyWork) {
  // A decode worker with a 1 MiB state budget (yoco-tiny: 256 KiB of retention states, 1 KiB of
  // K/V per row: 768 rows) behind a router whose prefill worker never comes (the decode worker
  // prefills short prompts itself).
  std::vector<std::string> flags = WorkerFlags();
  flags.insert(flags.end(), {"--memory-budget-mb", "1"});
  auto decode = Service::Start(Role::kDecode, flags, dir_ + "/decode");
  ASSERT_TRUE(decode.ok()) << decode.status();
  auto router = StartRouter(FreePort(), (*decode)->port());
  ASSERT_TRUE(router.ok()) << router.status();
  auto stub = v1::Yoco::NewStub((*router)->Channel());
  ASSERT_TRUE(WaitFor(
      [&] {
        return Generate(*stub, Request({0, 5}, 1), absl::Seconds(2)).status.ok();
      },
      absl::Seconds(60)));

  const double steps = (*decode)->Metric("yoco_decode_steps_total");
  const Generated refused = Generate(*stub, Request({0, 5}, 768), absl::Seconds(30));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(
      refused.status.error_message(),
      ::testing::ContainsRegex("the request needs 769 K/V rows.*--memory-budget-mb\\) holds 768"));
  EXPECT_EQ((*decode)->Metric("yoco_decode_steps_total"), steps);

  const Generated longest = Generate(*stub, Request({0, 5}, 767), absl::Seconds(60));
  EXPECT_TRUE(longest.status.ok()) << longest.status.error_message();
  EXPECT_EQ(longest.tokens, InProcessTokens({0, 5}, 767));
}

}  // namespace
}  // namespace yoco::testing
