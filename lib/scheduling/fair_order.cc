// Stride scheduling over the tenants of each priority level.
#include "lib/scheduling/fair_order.h"

#include <algorithm>

namespace yoco {

void FairOrder::Add(uint64_t id, const SchedulingClass& c) {
  Level& level = levels_[c.priority];
  auto [it, joined] = level.tenants.try_emplace(c.tenant);
  Tenant& tenant = it->second;
  if (joined) tenant.pass = level.pass;  // no credit for having been idle
  tenant.weight = std::max<uint32_t>(c.weight, 1);
  tenant.ids.insert(id);
  where_[id] = {c.priority, c.tenant};
}

void FairOrder::AddHolder(uint64_t id, const SchedulingClass& c) {
  const double pass = HolderPass(levels_[c.priority], c);
  Add(id, c);
  levels_[c.priority].tenants[c.tenant].pass = pass;
}

double FairOrder::HolderPass(const Level& level, const SchedulingClass& holder) {
  // No turn is given while the holder holds one, so the level's pass is that of the holder's
  // own turn (given by Pop) or of one before it (taken without queueing, never charged).
  double pass = level.pass + 1.0 / std::max<uint32_t>(holder.weight, 1);
  auto queued = level.tenants.find(holder.tenant);
  if (queued != level.tenants.end()) pass = std::max(pass, queued->second.pass);
  return pass;
}

bool FairOrder::AnyBefore(const SchedulingClass& holder, bool within_priority) const {
  if (levels_.empty()) return false;
  const auto& [priority, level] = *levels_.begin();
  if (priority != holder.priority) return priority < holder.priority;
  if (!within_priority) return false;
  const double mine = HolderPass(level, holder);
  // Equal passes: the holder, whose ticket came before any queued since it took the turn.
  for (const auto& [name, tenant] : level.tenants) {
    if (name != holder.tenant && tenant.pass < mine) return true;
  }
  return false;
}

bool FairOrder::Remove(uint64_t id) {
  auto found = where_.find(id);
  if (found == where_.end()) return false;
  auto level = levels_.find(found->second.first);
  auto tenant = level->second.tenants.find(found->second.second);
  std::set<uint64_t>& ids = tenant->second.ids;
  ids.erase(id);
  if (ids.empty()) level->second.tenants.erase(tenant);
  if (level->second.tenants.empty()) levels_.erase(level);
  where_.erase(found);
  return true;
}

std::map<std::string, FairOrder::Tenant>::const_iterator FairOrder::Next(const Level& level) {
  auto best = level.tenants.begin();
  for (auto it = level.tenants.begin(); it != level.tenants.end(); ++it) {
    // Equal passes: the one whose first request came earlier.
    if (it->second.pass < best->second.pass ||
        (it->second.pass == best->second.pass &&
         *it->second.ids.begin() < *best->second.ids.begin())) {
      best = it;
    }
  }
  return best;
}

std::optional<uint64_t> FairOrder::Peek() const {
  if (levels_.empty()) return std::nullopt;
  return *Next(levels_.begin()->second)->second.ids.begin();
}

void FairOrder::Pop() {
  if (levels_.empty()) return;
  auto level = levels_.begin();
  const std::string name = Next(level->second)->first;
  Tenant& tenant = level->second.tenants[name];
  level->second.pass = tenant.pass;
  tenant.pass += 1.0 / tenant.weight;
  where_.erase(*tenant.ids.begin());
  tenant.ids.erase(tenant.ids.begin());
  if (tenant.ids.empty()) level->second.tenants.erase(name);
  if (level->second.tenants.empty()) levels_.erase(level);
}

std::map<std::string, size_t> FairOrder::CountsByTenant() const {
  std::map<std::string, size_t> counts;
  for (const auto& [priority, level] : levels_) {
    for (const auto& [name, tenant] : level.tenants) counts[name] += tenant.ids.size();
  }
  return counts;
}

std::optional<uint64_t> FairOrder::Newest(const std::string& tenant) const {
  std::optional<uint64_t> newest;
  for (const auto& [priority, level] : levels_) {
    auto it = level.tenants.find(tenant);
    if (it != level.tenants.end()) newest = std::max(newest.value_or(0), *it->second.ids.rbegin());
  }
  return newest;
}

}  // namespace yoco
