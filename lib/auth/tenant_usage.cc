// Per-tenant admission: counts and token buckets.
#include "lib/auth/tenant_usage.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

constexpr char kRetryAfterPayload[] = "yoco.retry_after_ms";
constexpr char kLimitPayload[] = "yoco.tenant_limit";

absl::Status Refuse(absl::string_view limit, std::string message,
                    std::optional<absl::Duration> retry_after) {
  absl::Status st = absl::ResourceExhaustedError(std::move(message));
  st.SetPayload(kLimitPayload, absl::Cord(limit));
  if (retry_after.has_value()) {
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(*retry_after));
    st.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(ms)));
  }
  return st;
}

// How long a bucket refilling `per_minute` takes to gain `tokens`.
absl::Duration TimeToRefill(double tokens, uint64_t per_minute) {
  return absl::Seconds(60.0 * tokens / static_cast<double>(per_minute));
}

}  // namespace

TenantUsage::Lease::~Lease() { usage_.Release(tenant_); }

void TenantUsage::Lease::ChargeGenerated(uint64_t tokens) { usage_.Charge(tenant_, tokens); }

void TenantUsage::Refill(Bucket& b, uint64_t per_minute, absl::Time now) {
  const double capacity = static_cast<double>(per_minute);
  if (!b.started) {
    b = Bucket{capacity, now, true};
    return;
  }
  const double gained = absl::ToDoubleSeconds(now - b.refilled) * capacity / 60.0;
  b.tokens = std::min(capacity, b.tokens + std::max(0.0, gained));
  b.refilled = now;
}

absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> TenantUsage::Admit(const std::string& tenant,
                                                                       const TenantLimits& limits,
                                                                       uint64_t prompt_tokens) {
  const absl::Time now = now_();
  absl::MutexLock lock(&mu_);
  Tenant& t = tenants_[tenant];
  t.generated_per_minute = limits.generated_tokens_per_minute;
  if (limits.max_concurrent_requests > 0 && t.in_flight >= limits.max_concurrent_requests) {
    // A request in flight ends within seconds, typically: try again shortly.
    return Refuse("max_concurrent_requests",
                  absl::StrCat("tenant ", tenant, " is at its limit of ",
                               limits.max_concurrent_requests, " concurrent requests"),
                  absl::Seconds(1));
  }
  if (limits.generated_tokens_per_minute > 0) {
    Refill(t.generated, limits.generated_tokens_per_minute, now);
    if (t.generated.tokens <= 0) {
      return Refuse(
          "generated_tokens_per_minute",
          absl::StrCat("tenant ", tenant, " used its ", limits.generated_tokens_per_minute,
                       " generated tokens per minute"),
          TimeToRefill(1 - t.generated.tokens, limits.generated_tokens_per_minute));
    }
  }
  if (limits.prompt_tokens_per_minute > 0) {
    if (prompt_tokens > limits.prompt_tokens_per_minute) {
      return Refuse(
          "prompt_tokens_per_minute",
          absl::StrCat("the prompt's ", prompt_tokens, " tokens are more than tenant ", tenant,
                       "'s ", limits.prompt_tokens_per_minute, " prompt tokens per minute"),
          std::nullopt);
    }
    Refill(t.prompt, limits.prompt_tokens_per_minute, now);
    const double need = static_cast<double>(prompt_tokens);
    if (t.prompt.tokens < need) {
      return Refuse("prompt_tokens_per_minute",
                    absl::StrCat("tenant ", tenant, " used its ", limits.prompt_tokens_per_minute,
                                 " prompt tokens per minute"),
                    TimeToRefill(need - t.prompt.tokens, limits.prompt_tokens_per_minute));
    }
    t.prompt.tokens -= need;
  }
  ++t.in_flight;
  return std::unique_ptr<Lease>(new Lease(*this, tenant));
}

void TenantUsage::Release(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  --tenants_[tenant].in_flight;
}

void TenantUsage::Charge(const std::string& tenant, uint64_t tokens) {
  const absl::Time now = now_();
  absl::MutexLock lock(&mu_);
  Tenant& t = tenants_[tenant];
  if (t.generated_per_minute == 0) return;
  Refill(t.generated, t.generated_per_minute, now);
  t.generated.tokens -= static_cast<double>(tokens);
}

std::optional<absl::Duration> TenantUsage::RetryAfter(const absl::Status& refusal) {
  const auto payload = refusal.GetPayload(kRetryAfterPayload);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms)) return std::nullopt;
  return absl::Milliseconds(ms);
}

std::string TenantUsage::LimitOf(const absl::Status& refusal) {
  const auto payload = refusal.GetPayload(kLimitPayload);
  return payload.has_value() ? std::string(*payload) : "";
}

}  // namespace yoco
