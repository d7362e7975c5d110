// TenantDirectory: who a caller of the public API is, under the router's --tenants FILE. The
// file maps bearer tokens and client-certificate identities to tenant names:
//
//   {"tenants": {"team-a": {"tokens": ["...", "..."],
//                           "client_identities": ["spiffe://cluster/ns/rag/sa/team-a"],
//                           "limits": {"max_concurrent_requests": 8,
//                                      "prompt_tokens_per_minute": 2000000,
//                                      "generated_tokens_per_minute": 20000},
//                           "scheduling": {"priority": 0, "weight": 2}},
//                "team-b": {"tokens": ["..."]}}}
//
// A tenant's name decides its prefix-cache salt (TenantCacheSalt), so tenants never share
// snapshots, and it labels per-tenant metrics: hence the strict name syntax and the bound on
// how many there are. Tokens are held only as SHA-256 digests and looked up by digest. The file
// is re-read when it changes (a rotated Secret), checked at most every `reload_interval`; a
// changed file that does not parse is reported once and the last good set stays. Thread-safe.
#ifndef YOCO_LIB_AUTH_TENANT_DIRECTORY_H_
#define YOCO_LIB_AUTH_TENANT_DIRECTORY_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "lib/scheduling/scheduling_class.h"

namespace yoco {

inline constexpr size_t kMaxTenants = 1000;
inline constexpr size_t kMaxTenantCredentials = 100000;  // tokens + identities, all tenants
inline constexpr size_t kMinTokenBytes = 16, kMaxTokenBytes = 4096;
inline constexpr uint64_t kMaxTenantFileBytes = uint64_t{4} << 20;

// What one tenant may use (0: no limit): requests in flight at once, and prompt and generated
// tokens per minute (TenantUsage).
struct TenantLimits {
  uint64_t max_concurrent_requests = 0;
  uint64_t prompt_tokens_per_minute = 0;
  uint64_t generated_tokens_per_minute = 0;
  // Bytes of pinned snapshots (pre-cached with pin) the tenant may hold across the prefill
  // workers; a pin that would pass it is refused.
  uint64_t max_pinned_snapshot_bytes = 0;
  bool operator==(const TenantLimits&) const = default;
};
inline constexpr uint64_t kMaxTenantLimit = uint64_t{1} << 40;

// Where a tenant's requests wait among others' (FairOrder, at the workers): their priority when
// a request names none (lower goes first), and the tenant's share among those of the same
// priority.
struct TenantScheduling {
  int32_t priority = 0;
  uint32_t weight = 1;
  bool operator==(const TenantScheduling&) const = default;
};

struct TenantTable {
  std::vector<std::string> names;                                // sorted
  std::map<std::string, TenantLimits> limits;                    // tenants that have any
  std::map<std::string, TenantScheduling> scheduling;            // those not the default
  std::map<std::array<uint8_t, 32>, std::string> token_digests;  // SHA-256(token) -> tenant
  std::map<std::string, std::string> identities;                 // identity -> tenant
};

// INVALID_ARGUMENT naming the problem: not the format above, a name outside
// [a-z0-9][a-z0-9._-]{0,62}, a token outside kMinTokenBytes..kMaxTokenBytes printable ASCII, a
// token or identity given to two tenants, more than kMaxTenants tenants, a limit that is not an
// integer in [0, kMaxTenantLimit] or not one of TenantLimits', a priority outside
// [-kMaxSchedulingPriority, kMaxSchedulingPriority] or a weight outside
// [1, kMaxSchedulingWeight].
absl::StatusOr<TenantTable> ParseTenantFile(absl::string_view text);

// The cache salt of a tenant's requests. Clients cannot send it: under --tenants the router
// refuses a request that sets its own salt.
std::string TenantCacheSalt(absl::string_view tenant);

class TenantDirectory {
 public:
  // Reads the file now: its error if it is missing, not a regular file or does not parse.
  static absl::StatusOr<std::unique_ptr<TenantDirectory>> Open(
      std::string path, absl::Duration reload_interval,
      std::function<absl::Time()> now = [] { return absl::Now(); });

  // The tenant of a bearer token; UNAUTHENTICATED for any other token.
  absl::StatusOr<std::string> ByToken(absl::string_view token);
  // The tenant of the first identity (of a verified client certificate) the file names;
  // UNAUTHENTICATED when it names none.
  absl::StatusOr<std::string> ByIdentity(absl::Span<const std::string> identities);
  std::vector<std::string> Names();
  // The tenant's limits (none for a tenant the file gives none, or names no more).
  TenantLimits Limits(const std::string& tenant);
  TenantScheduling Scheduling(const std::string& tenant);

  // Re-reads the file if it changed since it was last read (size, inode, modification or
  // change time). OK when nothing changed or the new file was taken; otherwise its error, and
  // the last good set stays.
  absl::Status ReloadIfChanged();
  uint64_t loads() const;  // how many files were taken, the first included

 private:
  struct FileStamp {
    int64_t size = -1, inode = -1, mtime_ns = -1, ctime_ns = -1;
    bool operator==(const FileStamp&) const = default;
  };
  TenantDirectory(std::string path, absl::Duration reload_interval, std::function<absl::Time()> now)
      : path_(std::move(path)), reload_interval_(reload_interval), now_(std::move(now)) {}
  // The table to use now, re-read first when the interval has passed.
  std::shared_ptr<const TenantTable> Current();

  const std::string path_;
  const absl::Duration reload_interval_;
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const TenantTable> table_ ABSL_GUARDED_BY(mu_);
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  FileStamp failed_stamp_ ABSL_GUARDED_BY(mu_);  // a bad file is reported once, not at every check
  absl::Time checked_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t loads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_AUTH_TENANT_DIRECTORY_H_
