// FinishReport: the first prefill decides the cache outcome (a retry's prefill covers tokens the
// router sent itself), times and bytes add up over attempts, and a local prefill reports no
// cache.
#include "services/router/finish_report.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

v1::PrefillResponse Prefill(uint32_t cached, const std::string& tier, const std::string& miss,
                            double prefill_ms, double transfer_ms, uint64_t bytes) {
  v1::PrefillResponse p;
  p.set_cached_tokens(cached);
  p.set_cache_tier(tier);
  p.set_cache_miss_reason(miss);
  p.set_prefill_ms(prefill_ms);
  p.set_transfer_ms(transfer_ms);
  p.set_bundle_bytes(bytes);
  return p;
}

TEST(FinishReportTest, TheFirstPrefillsCacheAndEveryAttemptsTimes) {
  FinishReport report;
  int asked = 0;
  auto never_held = [&] {
    ++asked;
    return std::optional<ForgottenReason>();
  };
  EXPECT_TRUE(report.NotePrefill(Prefill(64, "disk", "", 10, 2, 1000), 100, never_held));
  // The retry resumed from 120 tokens (prompt + sent): not the client's cache.
  EXPECT_FALSE(report.NotePrefill(Prefill(120, "memory", "", 5, 1, 500), 100, never_held));
  report.AddPrefillMs(1);
  report.AddDecodeMs(30);
  report.AddDecodeMs(12);
  report.SetTtftMs(17);
  const v1::Finish f = report.Finished(v1::FINISH_REASON_LENGTH, 100, 9);
  EXPECT_EQ(asked, 0);  // a hit: nobody asks why it was forgotten
  EXPECT_EQ(f.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(f.usage().prompt_tokens(), 100u);
  EXPECT_EQ(f.usage().generated_tokens(), 9u);
  EXPECT_EQ(f.usage().cached_prompt_tokens(), 64u);
  EXPECT_EQ(f.cache_tier(), "disk");
  EXPECT_DOUBLE_EQ(f.timings().prefill_ms(), 16);
  EXPECT_DOUBLE_EQ(f.timings().transfer_ms(), 3);
  EXPECT_DOUBLE_EQ(f.timings().decode_ms(), 42);
  EXPECT_DOUBLE_EQ(f.timings().ttft_ms(), 17);
  EXPECT_EQ(f.transfer_bytes(), 1500u);
  EXPECT_FALSE(f.local_prefill());
}

TEST(FinishReportTest, CachedTokensNeverExceedThePrompt) {
  FinishReport report;
  report.NotePrefill(Prefill(300, "memory", "", 0, 0, 0), 256, [] { return std::nullopt; });
  EXPECT_EQ(report.Finished(v1::FINISH_REASON_EOS, 256, 1).usage().cached_prompt_tokens(), 256u);
}

TEST(FinishReportTest, AMissTheIndexSawGoSaysWhy) {
  for (auto [why, word] : {std::pair{ForgottenReason::kExpired, "expired"},
                           std::pair{ForgottenReason::kEvicted, "evicted"}}) {
    FinishReport report;
    report.NotePrefill(Prefill(0, "none", "none", 0, 0, 0), 10,
                       [why = why] { return std::optional(why); });
    EXPECT_EQ(report.Finished(v1::FINISH_REASON_EOS, 10, 1).cache_miss_reason(), word);
  }
  FinishReport corrupt;  // the worker's own reason stands
  corrupt.NotePrefill(Prefill(0, "none", "corrupt", 0, 0, 0), 10,
                      [] { return std::optional(ForgottenReason::kEvicted); });
  EXPECT_EQ(corrupt.Finished(v1::FINISH_REASON_EOS, 10, 1).cache_miss_reason(), "corrupt");
}

TEST(FinishReportTest, ALocalPrefillLooksAtNoCacheButALaterRemoteOneAddsItsTimes) {
  FinishReport report;
  report.NoteLocalPrefill();
  EXPECT_FALSE(
      report.NotePrefill(Prefill(50, "memory", "", 4, 3, 77), 60, [] { return std::nullopt; }));
  const v1::Finish f = report.Finished(v1::FINISH_REASON_STOP, 60, 2);
  EXPECT_TRUE(f.local_prefill());
  EXPECT_EQ(f.cache_tier(), "none");
  EXPECT_EQ(f.cache_miss_reason(), "none");
  EXPECT_EQ(f.usage().cached_prompt_tokens(), 0u);
  EXPECT_DOUBLE_EQ(f.timings().prefill_ms(), 4);
  EXPECT_EQ(f.transfer_bytes(), 77u);
}

}  // namespace
}  // namespace yoco
