// Files are written to a temporary name and renamed, so a crash never leaves a half-written
// snapshot under a real name (and a torn one would fail its checksum anyway).
#include "lib/cache/snapshot_disk_tier.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

constexpr char kSuffix[] = ".snap";

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SnapshotDiskTier>> SnapshotDiskTier::Open(
    const SnapshotDiskOptions& options, const ModelConfig& config, uint64_t model_fingerprint,
    std::vector<DiscardedSnapshot>* discarded) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the cache folder ", options.dir, ": ", ec.message()));
  }
  std::unique_ptr<SnapshotDiskTier> tier(new SnapshotDiskTier(options, config, model_fingerprint));
  for (const auto& dirent : std::filesystem::directory_iterator(options.dir, ec)) {
    const std::string name = dirent.path().filename().string();
    if (absl::EndsWith(name, ".tmp")) {  // an interrupted write
      std::filesystem::remove(dirent.path(), ec);
      continue;
    }
    if (!absl::EndsWith(name, kSuffix)) continue;
    auto key = BlockKey::FromHex(name.substr(0, name.size() - (sizeof kSuffix - 1)));
    if (!key.ok()) continue;  // not ours
    absl::StatusOr<std::string> bytes = ReadFile(dirent.path().string());
    absl::StatusOr<SnapshotFile> file = bytes.ok()
                                            ? ParseSnapshotFile(*bytes, config, model_fingerprint)
                                            : absl::StatusOr<SnapshotFile>(bytes.status());
    if (file.ok() && file->chain.back() != *key) {
      file = absl::DataLossError("the file's name and contents disagree");
    }
    if (!file.ok()) {
      std::filesystem::remove(dirent.path(), ec);
      if (discarded != nullptr) discarded->push_back({*key, file.status()});
      continue;
    }
    Entry& e = tier->entries_[*key];
    e.info = {*key, static_cast<int64_t>(file->tokens.size()), static_cast<int64_t>(bytes->size()),
              file->pinned, file->expires};
    e.last_use = ++tier->use_clock_;
    tier->bytes_ += e.info.bytes;
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list the cache folder ", options.dir, ": ", ec.message()));
  }
  return tier;
}

std::string SnapshotDiskTier::PathOf(const BlockKey& key) const {
  return (std::filesystem::path(options_.dir) / (key.Hex() + kSuffix)).string();
}

void SnapshotDiskTier::Erase(std::map<BlockKey, Entry>::iterator it) {
  std::error_code ec;
  std::filesystem::remove(PathOf(it->first), ec);
  bytes_ -= it->second.info.bytes;
  entries_.erase(it);
}

absl::StatusOr<DiskSnapshotInfo> SnapshotDiskTier::Put(const SnapshotFile& file,
                                                       std::vector<BlockKey>* evicted) {
  const BlockKey key = file.chain.back();
  const std::string bytes = SerializeSnapshotFile(file, fingerprint_);
  const int64_t size = static_cast<int64_t>(bytes.size());
  auto existing = entries_.find(key);
  const int64_t replaced = existing != entries_.end() ? existing->second.info.bytes : 0;
  // Make room: least recently used unpinned files first.
  while (bytes_ - replaced + size > options_.budget_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.info.pinned || it->first == key) continue;
      if (victim == entries_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == entries_.end()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the snapshot (", size, " bytes) does not fit the disk cache budget of ",
                       options_.budget_bytes, " bytes next to the pinned snapshots"));
    }
    if (evicted != nullptr) evicted->push_back(victim->first);
    Erase(victim);
  }
  const std::string path = PathOf(key), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  Entry& e = entries_[key];
  bytes_ += size - e.info.bytes;
  e.info = {key, static_cast<int64_t>(file.tokens.size()), size, file.pinned, file.expires};
  e.last_use = ++use_clock_;
  return e.info;
}

absl::StatusOr<SnapshotFile> SnapshotDiskTier::Load(const BlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return absl::NotFoundError("no such snapshot on disk");
  absl::StatusOr<std::string> bytes = ReadFile(PathOf(key));
  absl::StatusOr<SnapshotFile> file =
      bytes.ok() ? ParseSnapshotFile(*bytes, config_, fingerprint_)
                 : absl::StatusOr<SnapshotFile>(absl::DataLossError(bytes.status().message()));
  if (file.ok() && file->chain.back() != key) {
    file = absl::DataLossError("the file's name and contents disagree");
  }
  if (!file.ok()) {
    Erase(it);
    return file.status();
  }
  it->second.last_use = ++use_clock_;
  return file;
}

bool SnapshotDiskTier::Remove(const BlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  Erase(it);
  return true;
}

size_t SnapshotDiskTier::RemoveAll() {
  const size_t n = entries_.size();
  while (!entries_.empty()) Erase(entries_.begin());
  return n;
}

std::vector<BlockKey> SnapshotDiskTier::Expire(absl::Time now) {
  std::vector<BlockKey> gone;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.info.expires <= now) {
      gone.push_back(it->first);
      Erase(it);
    }
    it = next;
  }
  return gone;
}

std::vector<DiskSnapshotInfo> SnapshotDiskTier::List() const {
  std::vector<DiskSnapshotInfo> out;
  for (const auto& [key, e] : entries_) out.push_back(e.info);
  return out;
}

}  // namespace yoco
