// Probing runs outside the lock (RPCs may take up to their deadline); results are applied
// under it.
#include "lib/routing/worker_registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "lib/log/log.h"

namespace yoco {

WorkerRegistry::WorkerRegistry(std::vector<std::string> addresses, WorkerProbes probes,
                               absl::Duration interval)
    : probes_(std::move(probes)) {
  for (std::string& a : addresses) {
    workers_.emplace_back();
    workers_.back().address = std::move(a);
  }
  ProbeAll();
  prober_ = std::make_unique<PeriodicTask>(interval, [this] { ProbeAll(); });
}

WorkerRegistry::~WorkerRegistry() = default;

void WorkerRegistry::ProbeAll() {
  std::vector<size_t> members;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!workers_[i].removed) members.push_back(i);
    }
  }
  for (size_t i : members) Probe(i);
}

size_t WorkerRegistry::Add(const std::string& address) {
  size_t index = 0;
  {
    absl::MutexLock lock(&mu_);
    for (index = 0; index < workers_.size(); ++index) {
      if (workers_[index].address == address) break;
    }
    if (index == workers_.size()) {
      workers_.emplace_back();
      workers_.back().address = address;
    } else {
      workers_[index].removed = false;
    }
  }
  Probe(index);
  return index;
}

void WorkerRegistry::Remove(const std::string& address) {
  absl::MutexLock lock(&mu_);
  for (Worker& w : workers_) {
    if (w.address != address) continue;
    w.removed = true;
    w.healthy = false;
    w.snapshots.clear();
    w.listed = false;
  }
}

std::vector<std::string> WorkerRegistry::Members() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const Worker& w : workers_) {
    if (!w.removed) out.push_back(w.address);
  }
  return out;
}

std::string WorkerRegistry::address(size_t index) const {
  absl::MutexLock lock(&mu_);
  return workers_[index].address;
}

size_t WorkerRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return workers_.size();
}

void WorkerRegistry::Probe(size_t index) {
  absl::StatusOr<v1::WorkerInfo> info = probes_.info(index);
  if (!info.ok()) {
    absl::MutexLock lock(&mu_);
    Worker& w = workers_[index];
    // Anything but UNAVAILABLE: the worker answered with what this router cannot use (another
    // vocabulary): said once, even if it never was healthy, as it will not heal by itself.
    const bool unusable = info.status().code() != absl::StatusCode::kUnavailable;
    if (w.healthy || (unusable && w.unusable_because != info.status().message())) {
      (unusable ? LogWarning("worker unusable") : LogInfo("worker failed its health probe"))
          .With("worker", w.address)
          .With("error", info.status().message());
    }
    w.unusable_because = unusable ? std::string(info.status().message()) : "";
    MarkFailedLocked(w);
    return;
  }
  std::optional<std::vector<IndexedSnapshot>> listed;
  bool relist = false;
  {
    absl::MutexLock lock(&mu_);
    const Worker& w = workers_[index];
    relist = probes_.snapshots && (!w.listed || w.listed_generation != info->cache_generation() ||
                                   w.info.model_fingerprint() != info->model_fingerprint());
  }
  if (relist) {
    absl::StatusOr<std::vector<IndexedSnapshot>> keys = probes_.snapshots(index);
    if (keys.ok()) listed = std::move(*keys);
  }
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[index];
  if (w.removed) return;  // removed while the probe ran
  if (!w.healthy) {
    LogInfo("worker healthy")
        .With("worker", w.address)
        .With("model_version", absl::StrFormat("%016x", info->model_fingerprint()));
  }
  w.healthy = true;
  w.info = *info;
  w.in_flight_at_probe = w.in_flight;
  if (listed.has_value()) {
    std::vector<CacheEvent> changes = ChangesLocked(w, *listed, absl::Now());
    RememberGoneLocked(*listed, changes);
    if (probes_.events != nullptr) probes_.events->Append(std::move(changes));
    w.snapshots.clear();
    for (const IndexedSnapshot& s : *listed) w.snapshots[s.key] = s;
    w.listed = true;
    w.listed_generation = info->cache_generation();
  }
}

std::vector<CacheEvent> WorkerRegistry::ChangesLocked(const Worker& w,
                                                      const std::vector<IndexedSnapshot>& listed,
                                                      absl::Time now) const {
  std::vector<CacheEvent> events;
  std::set<BlockKey> kept;
  for (const IndexedSnapshot& s : listed) {
    kept.insert(s.key);
    auto it = w.snapshots.find(s.key);
    // Moved to the disk tier (or back): stored again, where it now is.
    if (it == w.snapshots.end() || it->second.disk_only != s.disk_only) {
      events.push_back({CacheEvent::Kind::kStored, s.key, w.address, s.disk_only, now});
    }
  }
  for (const auto& [key, old] : w.snapshots) {
    if (kept.count(key) > 0) continue;
    const auto kind = old.expires <= now ? CacheEvent::Kind::kExpired : CacheEvent::Kind::kEvicted;
    events.push_back({kind, key, w.address, old.disk_only, now});
  }
  return events;
}

void WorkerRegistry::RememberGoneLocked(const std::vector<IndexedSnapshot>& listed,
                                        const std::vector<CacheEvent>& changes) {
  for (const IndexedSnapshot& s : listed) {
    forgotten_.erase(s.key);  // back (pre-cached again): its old fate no longer applies
  }
  for (const CacheEvent& e : changes) {
    if (e.kind == CacheEvent::Kind::kStored) continue;
    forgotten_[e.key] = e.kind == CacheEvent::Kind::kExpired ? ForgottenReason::kExpired
                                                             : ForgottenReason::kEvicted;
    forgotten_order_.push_back(e.key);
  }
  while (forgotten_order_.size() > kMaxForgotten) {
    forgotten_.erase(forgotten_order_.front());
    forgotten_order_.pop_front();
  }
}

std::optional<ForgottenReason> WorkerRegistry::WhyForgotten(absl::Span<const BlockKey> keys) const {
  absl::MutexLock lock(&mu_);
  for (size_t j = keys.size(); j > 0; --j) {
    for (const Worker& w : workers_) {
      if (w.healthy && w.snapshots.count(keys[j - 1]) > 0) return std::nullopt;
    }
    if (auto it = forgotten_.find(keys[j - 1]); it != forgotten_.end()) return it->second;
  }
  return std::nullopt;
}

std::vector<CacheEvent> WorkerRegistry::Placement() const {
  absl::MutexLock lock(&mu_);
  std::vector<CacheEvent> events;
  const absl::Time now = absl::Now();
  for (const Worker& w : workers_) {
    if (!w.healthy || w.removed) continue;
    for (const auto& [key, s] : w.snapshots) {
      events.push_back({CacheEvent::Kind::kStored, key, w.address, s.disk_only, now});
    }
  }
  return events;
}

void WorkerRegistry::MarkFailed(size_t index) {
  absl::MutexLock lock(&mu_);
  if (workers_[index].healthy) {
    LogInfo("worker marked failed by a request").With("worker", workers_[index].address);
  }
  MarkFailedLocked(workers_[index]);
}

void WorkerRegistry::MarkFailedLocked(Worker& w) {
  w.healthy = false;
  // What it was noted to hold died with it (or will be refused anyway).
  for (const BlockKey& key : w.noted) w.snapshots.erase(key);
  w.noted.clear();
}

void WorkerRegistry::NoteHeld(size_t index, const BlockKey& key) {
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[index];
  if (probes_.snapshots || !w.snapshots.emplace(key, IndexedSnapshot{key}).second) return;
  w.noted.push_back(key);
  if (w.noted.size() > kMaxNoted) {
    w.snapshots.erase(w.noted.front());
    w.noted.pop_front();
  }
}

std::optional<WorkerChoice> WorkerRegistry::Choose(const WorkerQuery& query) {
  const absl::Span<const size_t> exclude = query.exclude;
  const absl::Span<const BlockKey> keys = query.keys;
  std::optional<WorkerChoice> best;
  bool any_healthy = false;
  {
    absl::MutexLock lock(&mu_);
    int64_t best_cost = INT64_MAX;
    std::optional<size_t> holder;  // longest snapshot
    int64_t holder_cached = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = workers_[i];
      if (!w.healthy) continue;
      any_healthy = true;
      if (std::find(exclude.begin(), exclude.end(), i) != exclude.end()) continue;
      if (!query.fingerprints.empty() &&
          std::find(query.fingerprints.begin(), query.fingerprints.end(),
                    w.info.model_fingerprint()) == query.fingerprints.end()) {
        continue;
      }
      int64_t cached = 0;
      bool disk_only = false;
      for (size_t j = keys.size(); j > 0; --j) {
        auto hit = w.snapshots.find(keys[j - 1]);
        if (hit != w.snapshots.end()) {
          cached = static_cast<int64_t>(j) * kCacheBlockTokens;
          disk_only = hit->second.disk_only;
          break;
        }
      }
      if (cached > holder_cached) {
        holder = i;
        holder_cached = cached;
      }
      const int64_t reported = int64_t{w.info.active_requests()} + w.info.queued_requests();
      const int64_t load = w.in_flight + std::max<int64_t>(reported - w.in_flight_at_probe, 0);
      const int64_t cost = std::max<int64_t>(query.prompt_tokens - cached, 0) +
                           load * query.load_penalty_tokens +
                           (disk_only ? query.disk_penalty_tokens : 0);
      if (cost < best_cost) {
        best_cost = cost;
        best.emplace();
        best->index = i;
        best->info = w.info;
        best->cached_tokens = cached;
      }
    }
    if (best.has_value() && holder_cached > best->cached_tokens) {
      best->better_holder = holder;
      best->better_cached_tokens = holder_cached;
    }
  }
  if (!any_healthy) ProbeSoon();  // maybe the workers have just come up
  return best;
}

void WorkerRegistry::ProbeSoon() {
  if (prober_) prober_->RunSoon();
}

WorkerRegistry::InFlight::InFlight(WorkerRegistry& registry, size_t index)
    : registry_(registry), index_(index) {
  absl::MutexLock lock(&registry_.mu_);
  ++registry_.workers_[index_].in_flight;
}

WorkerRegistry::InFlight::~InFlight() {
  absl::MutexLock lock(&registry_.mu_);
  --registry_.workers_[index_].in_flight;
}

bool WorkerRegistry::healthy(size_t index) const {
  absl::MutexLock lock(&mu_);
  return workers_[index].healthy;
}

uint64_t WorkerRegistry::fingerprint() const {
  absl::MutexLock lock(&mu_);
  for (const Worker& w : workers_) {
    if (w.healthy) return w.info.model_fingerprint();
  }
  return 0;
}

std::vector<uint64_t> WorkerRegistry::HealthyFingerprints(absl::Span<const size_t> exclude) const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> versions;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    if (!w.healthy || std::find(exclude.begin(), exclude.end(), i) != exclude.end()) continue;
    versions.push_back(w.info.model_fingerprint());
  }
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  return versions;
}

uint64_t WorkerRegistry::LongestSequenceRows() const {
  absl::MutexLock lock(&mu_);
  uint64_t longest = 0;
  for (const Worker& w : workers_) {
    if (!w.healthy) continue;
    if (w.info.max_sequence_rows() == 0) return 0;
    longest = std::max(longest, w.info.max_sequence_rows());
  }
  return longest;
}

std::vector<size_t> WorkerRegistry::HealthyWorkers() const {
  absl::MutexLock lock(&mu_);
  std::vector<size_t> out;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].healthy) out.push_back(i);
  }
  return out;
}

}  // namespace yoco
