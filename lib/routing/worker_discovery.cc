// Discovery rounds: lookups outside any lock the caller holds; changes applied in order.
#include "lib/routing/worker_discovery.h"

#include "absl/synchronization/mutex.h"
#include "lib/log/log.h"

namespace yoco {

WorkerDiscovery::WorkerDiscovery(std::string what, Lookup lookup, Change join, Change leave,
                                 absl::Duration interval)
    : what_(std::move(what)),
      lookup_(std::move(lookup)),
      join_(std::move(join)),
      leave_(std::move(leave)) {
  Sync().IgnoreError();  // logged; the next round tries again
  rounds_ = std::make_unique<PeriodicTask>(interval, [this] { Sync().IgnoreError(); });
}

WorkerDiscovery::~WorkerDiscovery() = default;

absl::Status WorkerDiscovery::Sync() {
  absl::MutexLock lock(&sync_mu_);
  absl::StatusOr<std::vector<std::string>> found = lookup_();
  if (!found.ok()) {
    ++failed_lookups_;
    if (!failing_) {  // one line per outage, not one per round
      LogWarning("worker discovery failed; keeping the known workers")
          .With("what", what_)
          .With("error", found.status().message())
          .With("known", members_.size());
    }
    failing_ = true;
    return found.status();
  }
  if (failing_) LogInfo("worker discovery lookups work again").With("what", what_);
  failing_ = false;
  const std::set<std::string> now(found->begin(), found->end());
  // Said once each time the set becomes empty: a name that does not resolve (a typo, a Service
  // with no ready pod) is otherwise a router that silently has no workers.
  if (now.empty() && (!members_.empty() || !said_empty_)) {
    LogWarning(
        "the name resolves to no address (no such name, or no ready pod behind it); no workers "
        "until it does")
        .With("what", what_);
  }
  said_empty_ = now.empty();
  for (const std::string& address : members_) {
    if (now.count(address) == 0) leave_(address);
  }
  for (const std::string& address : now) {
    if (members_.count(address) == 0) join_(address);
  }
  members_ = now;
  return absl::OkStatus();
}

}  // namespace yoco
