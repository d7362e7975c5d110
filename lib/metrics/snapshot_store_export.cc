// SnapshotStoreStats export; per-tier values carry the tier in their names.
#include "lib/metrics/snapshot_store_export.h"

namespace yoco {

void ExportSnapshotStoreMetrics(const std::string& prefix, SnapshotStore* store,
                                ScrapeCallbacks* callbacks) {
  using Type = ScrapeCallbacks::Type;
  auto add = [&](const char* name, const char* help, Type type,
                 double (*read)(const SnapshotStoreStats&)) {
    callbacks->Add(prefix + name, help, type, [store, read] { return read(store->stats()); });
  };
  add("_lookups_total", "Prefix-cache lookups (one per prefill)", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.lookups); });
  add("_hits_total", "Lookups that restored a snapshot", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.hits); });
  add("_hit_tokens_memory_total", "Prompt tokens restored from memory snapshots", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.hit_tokens_memory); });
  add("_hit_tokens_disk_total", "Prompt tokens restored from disk snapshots", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.hit_tokens_disk); });
  add("_snapshot_bytes_disk", "Bytes of snapshot files in the disk tier", Type::kGauge,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.disk_bytes); });
  add("_snapshots_disk", "Snapshot files in the disk tier", Type::kGauge,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.disk_snapshots); });
  add("_spills_total", "Snapshots moved from memory to disk by the memory budget", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.spills); });
  add("_discarded_total", "Snapshot files refused: corrupt or made by another model",
      Type::kCounter, [](const SnapshotStoreStats& s) { return static_cast<double>(s.discarded); });
  add("_disk_write_failures_total",
      "Snapshots the disk tier could not write (full disk, read-only folder)", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.disk_write_failures); });
  add("_snapshot_bytes_memory", "Bytes of K/V blocks and states held in memory", Type::kGauge,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.bytes); });
  add("_snapshots_memory", "Snapshots held in memory", Type::kGauge,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.snapshots); });
  add("_evictions_total", "Snapshots gone from every tier (budget or EvictCache)", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.evictions); });
  add("_expirations_total", "Snapshots dropped when their TTL passed", Type::kCounter,
      [](const SnapshotStoreStats& s) { return static_cast<double>(s.expirations); });
}

}  // namespace yoco
