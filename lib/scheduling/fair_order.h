// FairOrder: the order in which queued requests get a scarce resource (a prefill engine's turn,
// a seat in a decode batch). Lower priority values first; within one priority, tenants share
// by weight with stride scheduling: each turn a tenant takes adds 1/weight to its pass, and the
// waiting tenant with the smallest pass goes next; within a tenant, arrival order. A tenant that
// starts waiting joins at the pass of the last turn given, so time spent idle banks no credit
// and a tenant flooding the queue cannot push a newcomer behind its backlog: the newcomer is
// next or nearly so.
//
// Long work that holds a turn (a prefill, block by block) can hand it back between its steps:
// AnyBefore says whether a waiter goes before it, and AddHolder queues it again. Its tenant is
// charged per turn held, so a long prefill and another tenant's requests take turns block by
// block.
//
// Ids order a tenant's own requests: give them in arrival order, and a request that leaves and
// comes back with its old id (a router waiter woken that found no room) keeps its turn.
//
// Not thread-safe: the queue that owns it locks.
#ifndef YOCO_LIB_SCHEDULING_FAIR_ORDER_H_
#define YOCO_LIB_SCHEDULING_FAIR_ORDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "lib/scheduling/scheduling_class.h"

namespace yoco {

class FairOrder {
 public:
  // Queues `id` (unique among those queued) of class `c`.
  void Add(uint64_t id, const SchedulingClass& c);
  // Queues `id`, the holder of the turn of class `c` handing it back, its tenant charged for the
  // turn it held: it may have got that turn without queueing (uncharged), and would otherwise
  // win every tie against the tenants it hands over to.
  void AddHolder(uint64_t id, const SchedulingClass& c);
  // Whether a queued id would go before the holder of class `holder` queued by AddHolder now: a
  // higher priority, or (`within_priority`) at its priority another tenant with a lower pass.
  bool AnyBefore(const SchedulingClass& holder, bool within_priority = true) const;
  // Takes `id` out (it gave up); false when it is not queued.
  bool Remove(uint64_t id);
  // The id that goes next, without taking it.
  std::optional<uint64_t> Peek() const;
  // Takes Peek()'s id, charging its tenant one turn.
  void Pop();
  size_t size() const { return where_.size(); }
  // How many ids each tenant has queued, at every priority together (tenants with none absent).
  std::map<std::string, size_t> CountsByTenant() const;
  // `tenant`'s highest (latest) queued id at any priority; nullopt when it has none.
  std::optional<uint64_t> Newest(const std::string& tenant) const;
  bool empty() const { return where_.empty(); }

 private:
  struct Tenant {
    std::set<uint64_t> ids;  // lowest (earliest) first
    double pass = 0;
    uint32_t weight = 1;
  };
  struct Level {
    std::map<std::string, Tenant> tenants;  // those with ids queued
    double pass = 0;                        // of the last turn given at this priority
  };
  // The pass `holder`'s tenant is at, its turn charged: what AddHolder gives it.
  static double HolderPass(const Level& level, const SchedulingClass& holder);
  // The tenant whose turn it is at `level` (non-empty).
  static std::map<std::string, Tenant>::const_iterator Next(const Level& level);

  std::map<int32_t, Level> levels_;                            // lowest priority value first
  std::map<uint64_t, std::pair<int32_t, std::string>> where_;  // id -> priority, tenant
};

}  // namespace yoco

#endif  // YOCO_LIB_SCHEDULING_FAIR_ORDER_H_
