// Files are written to a temporary name and renamed, so a crash never leaves a half-written
// snapshot under a real name (and a torn one would fail its checksum anyway).
#include "lib/cache/snapshot_disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"

namespace yoco {
namespace {

constexpr char kSuffix[] = ".snap";

// Reads a snapshot file without trusting it: a regular file only (a FIFO would block, a link to
// /dev/zero would never end), whose size is exactly what its header implies for this model and
// within the tier's budget, all checked before the body is read.
absl::StatusOr<std::string> ReadSnapshotBytes(const std::string& path, const ModelConfig& config,
                                              int64_t budget_bytes) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return absl::DataLossError(fd.status().message());
  struct stat st {};
  std::string bytes(kSnapshotFileHeaderBytes, '\0');
  absl::Status status;
  if (fstat(*fd, &st) != 0) {
    status = absl::DataLossError(absl::StrCat("cannot stat ", path));
  } else if (pread(*fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    status = absl::DataLossError("not a snapshot file, or truncated");
  } else {
    absl::StatusOr<uint64_t> expected = SnapshotFileBytes(bytes, config);
    if (!expected.ok()) {
      status = expected.status();
    } else if (*expected != static_cast<uint64_t>(st.st_size) ||
               *expected > static_cast<uint64_t>(budget_bytes)) {
      status = absl::DataLossError(absl::StrCat("file of ", st.st_size,
                                                " bytes, but its header "
                                                "says ",
                                                *expected, " (budget ", budget_bytes, ")"));
    } else {
      bytes.resize(*expected);
      size_t got = 0;
      while (got < bytes.size()) {
        const ssize_t n = pread(*fd, bytes.data() + got, bytes.size() - got, got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got != bytes.size()) status = absl::DataLossError("snapshot file shrank while read");
    }
  }
  close(*fd);
  if (!status.ok()) return status;
  return bytes;
}

// Writes `bytes` to `path` (created or truncated), reporting every failure, a full disk
// included (RESOURCE_EXHAUSTED); a partial file is removed.
absl::Status WriteWholeFile(const std::string& path, const std::string& bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  int error = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (error == 0 && fdatasync(fd) != 0) error = errno;
  if (close(fd) != 0 && error == 0) error = errno;
  if (error == 0) return absl::OkStatus();
  unlink(path.c_str());
  const std::string message = absl::StrCat("cannot write ", path, ": ", std::strerror(error));
  return error == ENOSPC || error == EDQUOT ? absl::ResourceExhaustedError(message)
                                            : absl::UnavailableError(message);
}

DiskSnapshotInfo InfoOf(const SnapshotFile& file, int64_t bytes) {
  DiskSnapshotInfo info;
  info.key = file.chain.back();
  info.tokens = static_cast<int64_t>(file.tokens.size());
  info.bytes = bytes;
  info.pinned = file.pinned;
  info.expires = file.expires;
  info.first_key = file.chain.front();
  info.first_block.assign(file.tokens.begin(), file.tokens.begin() + kCacheBlockTokens);
  return info;
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
  std::error_code list_error;
  for (const auto& dirent : std::filesystem::directory_iterator(options.dir, list_error)) {
    const std::string name = dirent.path().filename().string();
    std::error_code ignored;  // a read-only folder: what cannot be deleted is left, not fatal
    const bool regular = dirent.is_regular_file(ignored) && !dirent.is_symlink(ignored);
    if (absl::EndsWith(name, ".tmp")) {  // an interrupted write
      if (regular) std::filesystem::remove(dirent.path(), ignored);
      continue;
    }
    if (!absl::EndsWith(name, kSuffix)) continue;
    auto key = BlockKey::FromHex(name.substr(0, name.size() - (sizeof kSuffix - 1)));
    // Only the canonical (lower-case) name is ours: another spelling would count a file twice.
    if (!key.ok() || name != key->Hex() + kSuffix) continue;
    if (!regular) {
      // Not deleted: it is not ours to remove (a directory may hold anything).
      if (discarded != nullptr) {
        discarded->push_back({*key, absl::DataLossError("not a regular file; left in place")});
      }
      continue;
    }
    absl::StatusOr<std::string> bytes =
        ReadSnapshotBytes(dirent.path().string(), config, options.budget_bytes);
    absl::StatusOr<SnapshotFile> file =
        bytes.ok() ? ParseSnapshotFile(*bytes, config, model_fingerprint, options.cache_key)
                   : absl::StatusOr<SnapshotFile>(bytes.status());
    if (file.ok() && file->chain.back() != *key) {
      file = absl::DataLossError("the file's name and contents disagree");
    }
    if (!file.ok()) {
      std::filesystem::remove(dirent.path(), ignored);
      if (discarded != nullptr) discarded->push_back({*key, file.status()});
      continue;
    }
    Entry& e = tier->entries_[*key];
    e.info = InfoOf(*file, static_cast<int64_t>(bytes->size()));
    e.last_use = ++tier->use_clock_;
    tier->bytes_ += e.info.bytes;
  }
  if (list_error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list the cache folder ", options.dir, ": ", list_error.message()));
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
  const std::string bytes = SerializeSnapshotFile(file, fingerprint_, options_.cache_key);
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
  if (absl::Status st = WriteWholeFile(tmp, bytes); !st.ok()) return st;
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  }
  Entry& e = entries_[key];
  bytes_ += size - e.info.bytes;
  e.info = InfoOf(file, size);
  e.last_use = ++use_clock_;
  return e.info;
}

absl::StatusOr<SnapshotFile> SnapshotDiskTier::Load(const BlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return absl::NotFoundError("no such snapshot on disk");
  absl::StatusOr<std::string> bytes =
      ReadSnapshotBytes(PathOf(key), config_, options_.budget_bytes);
  absl::StatusOr<SnapshotFile> file =
      bytes.ok() ? ParseSnapshotFile(*bytes, config_, fingerprint_, options_.cache_key)
                 : absl::StatusOr<SnapshotFile>(bytes.status());
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
