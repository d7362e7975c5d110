// Per-tenant limits against a clock the test moves: concurrent requests come back when a lease
// ends; prompt tokens per minute refill at their rate and say when to retry; generated tokens
// charged after the fact hold the next request back until repaid; tenants never share a limit.
#include "lib/auth/tenant_usage.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

class TenantUsageTest : public ::testing::Test {
 protected:
  TenantUsage usage_{[this] { return now_; }};
  absl::Time now_ = absl::FromUnixSeconds(1000000);
};

void ExpectRefused(const absl::StatusOr<std::unique_ptr<TenantUsage::Lease>>& got,
                   const std::string& words) {
  ASSERT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
  EXPECT_NE(got.status().message().find(words), std::string::npos) << got.status();
}

TEST_F(TenantUsageTest, ConcurrentRequestsComeBackWhenALeaseEnds) {
  const TenantLimits limits{2, 0, 0};
  auto a = usage_.Admit("acme", limits, 10);
  auto b = usage_.Admit("acme", limits, 10);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto third = usage_.Admit("acme", limits, 10);
  ExpectRefused(third, "tenant acme is at its limit of 2 concurrent requests");
  EXPECT_EQ(TenantUsage::RetryAfter(third.status()), absl::Seconds(1));
  EXPECT_EQ(TenantUsage::LimitOf(third.status()), "max_concurrent_requests");
  EXPECT_TRUE(usage_.Admit("other", limits, 10).ok());  // another tenant's count
  a->reset();
  EXPECT_TRUE(usage_.Admit("acme", limits, 10).ok());
}

TEST_F(TenantUsageTest, PromptTokensRefillAtTheirRate) {
  const TenantLimits limits{0, 6000, 0};  // 100 tokens a second
  ASSERT_TRUE(usage_.Admit("acme", limits, 5000).ok());
  ASSERT_TRUE(usage_.Admit("acme", limits, 1000).ok());
  const auto over = usage_.Admit("acme", limits, 500);
  ExpectRefused(over, "tenant acme used its 6000 prompt tokens per minute");
  EXPECT_EQ(TenantUsage::RetryAfter(over.status()), absl::Seconds(5));  // 500 at 100/s
  EXPECT_EQ(TenantUsage::LimitOf(over.status()), "prompt_tokens_per_minute");
  now_ += absl::Seconds(4);
  ExpectRefused(usage_.Admit("acme", limits, 500), "prompt tokens per minute");
  now_ += absl::Seconds(1);
  EXPECT_TRUE(usage_.Admit("acme", limits, 500).ok());
  now_ += absl::Hours(1);  // refills to a minute's worth, no more
  ASSERT_TRUE(usage_.Admit("acme", limits, 6000).ok());
  ExpectRefused(usage_.Admit("acme", limits, 1), "prompt tokens per minute");
}

TEST_F(TenantUsageTest, APromptLargerThanAMinutesWorthNeverFits) {
  const auto huge = usage_.Admit("acme", TenantLimits{0, 6000, 0}, 6001);
  ExpectRefused(huge, "the prompt's 6001 tokens are more than tenant acme's 6000");
  EXPECT_EQ(TenantUsage::RetryAfter(huge.status()), std::nullopt);
  EXPECT_EQ(TenantUsage::LimitOf(huge.status()), "prompt_tokens_per_minute");
  EXPECT_EQ(TenantUsage::LimitOf(absl::ResourceExhaustedError("a worker's queue")), "");
}

TEST_F(TenantUsageTest, GeneratedTokensAreRepaidBeforeTheNextRequest) {
  const TenantLimits limits{0, 0, 600};  // 10 tokens a second
  auto lease = usage_.Admit("acme", limits, 1);
  ASSERT_TRUE(lease.ok());
  (*lease)->ChargeGenerated(500);
  EXPECT_TRUE(usage_.Admit("acme", limits, 1).ok());  // 100 left
  (*lease)->ChargeGenerated(300);                     // 200 in debt
  const auto refused = usage_.Admit("acme", limits, 1);
  ExpectRefused(refused, "tenant acme used its 600 generated tokens per minute");
  EXPECT_EQ(TenantUsage::RetryAfter(refused.status()), absl::Milliseconds(20100));  // 201 tokens
  EXPECT_EQ(TenantUsage::LimitOf(refused.status()), "generated_tokens_per_minute");
  now_ += absl::Seconds(21);
  EXPECT_TRUE(usage_.Admit("acme", limits, 1).ok());
}

TEST_F(TenantUsageTest, NoLimitsAdmitEverything) {
  std::vector<std::unique_ptr<TenantUsage::Lease>> leases;
  for (int i = 0; i < 1000; ++i) {
    auto lease = usage_.Admit("acme", TenantLimits(), 1 << 20);
    ASSERT_TRUE(lease.ok());
    (*lease)->ChargeGenerated(1 << 20);
    leases.push_back(*std::move(lease));
  }
}

}  // namespace
}  // namespace yoco
