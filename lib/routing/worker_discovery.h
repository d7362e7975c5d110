// WorkerDiscovery: keeps a role's workers in step with a lookup (a DNS name, for instance)
// that is asked every `interval`: an address that appears joins, one that vanishes leaves (the
// router stops sending it new requests; streams in flight finish). A failed lookup keeps the
// last known set, so a DNS hiccup never empties the cluster.
#ifndef YOCO_LIB_ROUTING_WORKER_DISCOVERY_H_
#define YOCO_LIB_ROUTING_WORKER_DISCOVERY_H_

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/threading/periodic_task.h"

namespace yoco {

class WorkerDiscovery {
 public:
  using Lookup = std::function<absl::StatusOr<std::vector<std::string>>()>;
  using Change = std::function<void(const std::string& address)>;

  // Looks up once before returning, then every `interval` on its own thread (none if zero).
  WorkerDiscovery(std::string what, Lookup lookup, Change join, Change leave,
                  absl::Duration interval);
  ~WorkerDiscovery();
  WorkerDiscovery(const WorkerDiscovery&) = delete;
  WorkerDiscovery& operator=(const WorkerDiscovery&) = delete;

  // One round: look up, then join and leave what changed. Returns the lookup's status.
  absl::Status Sync();
  uint64_t failed_lookups() const { return failed_lookups_.load(); }

 private:
  const std::string what_;  // for log lines, e.g. "prefill workers (dns:///...)"
  const Lookup lookup_;
  const Change join_, leave_;
  absl::Mutex sync_mu_;  // one Sync at a time
  std::set<std::string> members_ ABSL_GUARDED_BY(sync_mu_);
  bool failing_ ABSL_GUARDED_BY(sync_mu_) = false;
  bool said_empty_ ABSL_GUARDED_BY(sync_mu_) =
      false;  // the last round found no address, and said so
  std::atomic<uint64_t> failed_lookups_{0};
  std::unique_ptr<PeriodicTask> rounds_;  // last: it syncs through the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_WORKER_DISCOVERY_H_
