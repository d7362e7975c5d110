// TenantUsage: what each tenant uses now against its TenantLimits — requests in flight, and
// token buckets for prompt and generated tokens per minute (each holds one minute's worth and
// refills continuously, so a tenant may burst up to its minute and then runs at its rate). The
// router admits every request of a tenant through it; a refusal is RESOURCE_EXHAUSTED naming the
// tenant and the limit, and says when to retry (RetryAfter). Generated tokens are charged as they
// stream, so a long answer may take the bucket below zero: the tenant's next request then waits
// until it has refilled. Thread-safe.
#ifndef YOCO_LIB_AUTH_TENANT_USAGE_H_
#define YOCO_LIB_AUTH_TENANT_USAGE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/auth/tenant_directory.h"

namespace yoco {

class TenantUsage {
 public:
  // One admitted request: in flight until destroyed.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    void ChargeGenerated(uint64_t tokens);

   private:
    friend class TenantUsage;
    Lease(TenantUsage& usage, std::string tenant) : usage_(usage), tenant_(std::move(tenant)) {}
    TenantUsage& usage_;
    const std::string tenant_;
  };

  explicit TenantUsage(std::function<absl::Time()> now = [] { return absl::Now(); })
      : now_(std::move(now)) {}

  // Admits a request of `tenant` with `prompt_tokens` under `limits` (the tenant file's now):
  // RESOURCE_EXHAUSTED naming the limit when it is at its concurrent requests, its prompt tokens
  // for the minute are used up (or the prompt alone is more than a minute's worth: then no retry
  // helps), or its generated tokens are.
  absl::StatusOr<std::unique_ptr<Lease>> Admit(const std::string& tenant,
                                               const TenantLimits& limits, uint64_t prompt_tokens);

  // When a refusal of Admit's may succeed if tried again; none when it never will.
  static std::optional<absl::Duration> RetryAfter(const absl::Status& refusal);
  // The limit a refusal of Admit's is about, as the tenant file names it
  // ("max_concurrent_requests", "prompt_tokens_per_minute", "generated_tokens_per_minute"); ""
  // for any other status. The router's refusal metric is labelled with it.
  static std::string LimitOf(const absl::Status& refusal);

 private:
  struct Bucket {
    double tokens = 0;  // may go below zero (generated tokens are charged after the fact)
    absl::Time refilled;
    bool started = false;
  };
  struct Tenant {
    uint64_t in_flight = 0;
    uint64_t generated_per_minute = 0;  // the limit the charges are against
    Bucket prompt, generated;
  };
  // Refills `b` (capacity and rate: `per_minute`) up to now.
  void Refill(Bucket& b, uint64_t per_minute, absl::Time now);
  void Release(const std::string& tenant);
  void Charge(const std::string& tenant, uint64_t tokens);

  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  std::map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yoco

#endif  // YOCO_LIB_AUTH_TENANT_USAGE_H_
