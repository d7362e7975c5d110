// Files are written to a temporary name and renamed, so a crash never leaves a half-written
// file under a real name (and a torn one would fail its checksum anyway). Blocks are written
// before the manifest that refers to them, so a crash leaves at worst blocks no manifest refers
// to, which the next Open deletes.
#include "lib/cache/snapshot_disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"

namespace yoco {
namespace {

constexpr char kSuffix[] = ".snap";
constexpr char kBlockSuffix[] = ".kvb";

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
// included (RESOURCE_EXHAUSTED); a partial file is removed. With `sync`, durable on return.
absl::Status WriteWholeFile(const std::string& path, const std::string& bytes, bool sync = true) {
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
  if (error == 0 && sync && fdatasync(fd) != 0) error = errno;
  if (close(fd) != 0 && error == 0) error = errno;
  if (error == 0) return absl::OkStatus();
  unlink(path.c_str());
  const std::string message = absl::StrCat("cannot write ", path, ": ", std::strerror(error));
  return error == ENOSPC || error == EDQUOT ? absl::ResourceExhaustedError(message)
                                            : absl::UnavailableError(message);
}

// Reads a file of a size known in advance (a block file) without trusting it, as above.
absl::StatusOr<std::string> ReadExactFile(const std::string& path, uint64_t expected) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return absl::DataLossError(fd.status().message());
  struct stat st {};
  std::string bytes;
  absl::Status status;
  if (fstat(*fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != expected) {
    status = absl::DataLossError(absl::StrCat(path, " is not ", expected, " bytes long"));
  } else {
    bytes.resize(expected);
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = pread(*fd, bytes.data() + got, bytes.size() - got, got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != bytes.size()) status = absl::DataLossError(absl::StrCat(path, " shrank while read"));
  }
  close(*fd);
  if (!status.ok()) return status;
  return bytes;
}

// Writes under a temporary name, then renames: a crash never leaves a half-written file under
// a real name.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes,
                                 bool sync = true) {
  const std::string tmp = path + ".tmp";
  if (absl::Status st = WriteWholeFile(tmp, bytes, sync); !st.ok()) return st;
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Makes everything written to the folder's file system durable (syncfs: one flush for many
// files).
absl::Status SyncFolder(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", dir, ": ", std::strerror(errno)));
  }
  const int rc = syncfs(fd);
  const int error = errno;
  close(fd);
  if (rc != 0) {
    const std::string message = absl::StrCat("cannot sync ", dir, ": ", std::strerror(error));
    return error == ENOSPC || error == EDQUOT ? absl::ResourceExhaustedError(message)
                                              : absl::UnavailableError(message);
  }
  return absl::OkStatus();
}

DiskSnapshotInfo InfoOf(const SnapshotManifest& m, int64_t bytes) {
  DiskSnapshotInfo info;
  info.key = m.chain.back();
  info.tokens = static_cast<int64_t>(m.chain.size()) * kCacheBlockTokens;
  info.bytes = bytes;
  info.pinned = m.pinned;
  info.expires = m.expires;
  info.first_key = m.chain.front();
  info.first_block = m.first_block;
  return info;
}

// The canonical (lower-case) name's key: another spelling would count a file twice.
std::optional<BlockKey> KeyOfName(const std::string& name, absl::string_view suffix) {
  if (!absl::EndsWith(name, suffix)) return std::nullopt;
  auto key = BlockKey::FromHex(name.substr(0, name.size() - suffix.size()));
  if (!key.ok() || name != absl::StrCat(key->Hex(), suffix)) return std::nullopt;
  return *key;
}

}  // namespace

SnapshotDiskTier::SnapshotDiskTier(SnapshotDiskOptions options, const ModelConfig& config,
                                   uint64_t fingerprint)
    : options_(std::move(options)),
      config_(config),
      fingerprint_(fingerprint),
      block_bytes_(static_cast<int64_t>(KvBlockFileBytes(config))) {}

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
  std::vector<DiscardedSnapshot> local;
  if (discarded == nullptr) discarded = &local;
  std::map<BlockKey, absl::Status> bad_blocks;
  std::vector<std::pair<std::string, BlockKey>> manifests;
  std::error_code list_error;
  for (const auto& dirent : std::filesystem::directory_iterator(options.dir, list_error)) {
    const std::string name = dirent.path().filename().string();
    std::error_code ignored;  // a read-only folder: what cannot be deleted is left, not fatal
    const bool regular = dirent.is_regular_file(ignored) && !dirent.is_symlink(ignored);
    if (absl::EndsWith(name, ".tmp")) {  // an interrupted write
      if (regular) std::filesystem::remove(dirent.path(), ignored);
      continue;
    }
    if (std::optional<BlockKey> block = KeyOfName(name, kBlockSuffix)) {
      if (regular) tier->OpenBlock(dirent.path().string(), *block, &bad_blocks);
      continue;  // anything else under the name is not ours to remove
    }
    std::optional<BlockKey> key = KeyOfName(name, kSuffix);
    if (!key.has_value()) continue;
    if (!regular) {
      // Not deleted: it is not ours to remove (a directory may hold anything).
      discarded->push_back({*key, absl::DataLossError("not a regular file; left in place")});
      continue;
    }
    manifests.emplace_back(dirent.path().string(), *key);
  }
  if (list_error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list the cache folder ", options.dir, ": ", list_error.message()));
  }
  for (const auto& [path, key] : manifests) tier->OpenManifest(path, key, bad_blocks, discarded);
  // Blocks no snapshot refers to: a write interrupted between its blocks and its manifest.
  for (auto it = tier->blocks_.begin(); it != tier->blocks_.end();) {
    auto next = std::next(it);
    if (it->second == 0) {
      ++it->second;
      tier->Unref(it->first);
    }
    it = next;
  }
  return tier;
}

void SnapshotDiskTier::OpenBlock(const std::string& path, const BlockKey& key,
                                 std::map<BlockKey, absl::Status>* bad_blocks) {
  absl::StatusOr<std::string> bytes = ReadExactFile(path, block_bytes_);
  absl::Status status = bytes.status();
  if (bytes.ok()) {
    status = ParseKvBlockFile(*bytes, key, config_, fingerprint_, options_.cache_key).status();
  }
  if (!status.ok()) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    (*bad_blocks)[key] = status;
    return;
  }
  blocks_[key] = 0;
  bytes_ += block_bytes_;
}

void SnapshotDiskTier::OpenManifest(const std::string& path, const BlockKey& key,
                                    const std::map<BlockKey, absl::Status>& bad_blocks,
                                    std::vector<DiscardedSnapshot>* discarded) {
  std::error_code ignored;
  auto refuse = [&](const absl::Status& why) {
    std::filesystem::remove(path, ignored);
    discarded->push_back({key, why});
  };
  absl::StatusOr<std::string> bytes = ReadSnapshotBytes(path, config_, options_.budget_bytes);
  if (!bytes.ok()) return refuse(bytes.status());
  if (SnapshotFileVersion(*bytes) == SnapshotFile::kVersion) {
    // A version-2 file holds its rows itself: stored again as blocks and a manifest.
    absl::StatusOr<SnapshotFile> file =
        ParseSnapshotFile(*bytes, config_, fingerprint_, options_.cache_key);
    if (file.ok() && file->chain.back() != key) {
      file = absl::DataLossError("the file's name and contents disagree");
    }
    if (!file.ok()) return refuse(file.status());
    if (absl::Status st = Put(*file).status(); !st.ok()) return refuse(st);
    return;
  }
  absl::StatusOr<SnapshotManifest> manifest =
      ParseSnapshotManifest(*bytes, config_, fingerprint_, options_.cache_key);
  if (manifest.ok() && manifest->chain.back() != key) {
    manifest = absl::DataLossError("the file's name and contents disagree");
  }
  if (!manifest.ok()) return refuse(manifest.status());
  for (const BlockKey& block : manifest->chain) {
    if (blocks_.count(block) != 0) continue;
    auto bad = bad_blocks.find(block);
    return refuse(bad != bad_blocks.end()
                      ? bad->second
                      : absl::DataLossError(absl::StrCat("its block file ", block.Hex(),
                                                         kBlockSuffix, " is missing")));
  }
  Register(*manifest, static_cast<int64_t>(bytes->size()));
}

std::string SnapshotDiskTier::ManifestPath(const BlockKey& key) const {
  return (std::filesystem::path(options_.dir) / (key.Hex() + kSuffix)).string();
}

std::string SnapshotDiskTier::BlockPath(const BlockKey& key) const {
  return (std::filesystem::path(options_.dir) / (key.Hex() + kBlockSuffix)).string();
}

SnapshotDiskTier::Entry& SnapshotDiskTier::Register(const SnapshotManifest& manifest,
                                                    int64_t manifest_bytes) {
  Entry& e = entries_[manifest.chain.back()];
  e.chain = manifest.chain;
  e.manifest_bytes = manifest_bytes;
  for (const BlockKey& block : e.chain) ++blocks_[block];
  e.info =
      InfoOf(manifest, manifest_bytes + static_cast<int64_t>(manifest.chain.size()) * block_bytes_);
  e.last_use = ++use_clock_;
  bytes_ += manifest_bytes;
  return e;
}

void SnapshotDiskTier::Unref(const BlockKey& block) {
  auto it = blocks_.find(block);
  if (it == blocks_.end() || --it->second > 0) return;
  std::error_code ignored;
  std::filesystem::remove(BlockPath(block), ignored);
  bytes_ -= block_bytes_;
  blocks_.erase(it);
}

void SnapshotDiskTier::Erase(std::map<BlockKey, Entry>::iterator it) {
  std::error_code ec;
  std::filesystem::remove(ManifestPath(it->first), ec);
  bytes_ -= it->second.manifest_bytes;
  for (const BlockKey& block : it->second.chain) Unref(block);
  entries_.erase(it);
}

absl::StatusOr<DiskSnapshotInfo> SnapshotDiskTier::Put(const SnapshotManifest& manifest,
                                                       const BlockRows& rows,
                                                       std::vector<BlockKey>* evicted,
                                                       bool durable) {
  const BlockKey key = manifest.chain.back();
  const std::string bytes = SerializeSnapshotManifest(manifest, fingerprint_, options_.cache_key);
  const int64_t size = static_cast<int64_t>(bytes.size());
  // The blocks already on disk are held while room is made, so that making room never deletes
  // one this snapshot needs; blocks written below are held too. On failure the holds go (and
  // with them every block only this Put wrote); on success they are the snapshot's references.
  std::vector<BlockKey> held;
  for (const BlockKey& block : manifest.chain) {
    auto it = blocks_.find(block);
    if (it == blocks_.end()) continue;
    ++it->second;
    held.push_back(block);
  }
  auto release = [&] {
    for (const BlockKey& block : held) Unref(block);
  };
  auto existing = entries_.find(key);
  const int64_t missing = static_cast<int64_t>(manifest.chain.size() - held.size());
  const int64_t need = size + missing * block_bytes_ -
                       (existing != entries_.end() ? existing->second.manifest_bytes : 0);
  // Make room: least recently used unpinned snapshots first.
  while (bytes_ + need > options_.budget_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.info.pinned || it->first == key) continue;
      if (victim == entries_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == entries_.end()) {
      release();
      return absl::ResourceExhaustedError(
          absl::StrCat("the snapshot (", size + missing * block_bytes_,
                       " new bytes) does not fit the disk cache budget of ", options_.budget_bytes,
                       " bytes next to the pinned snapshots"));
    }
    if (evicted != nullptr) evicted->push_back(victim->first);
    Erase(victim);
  }
  // New blocks are made durable together (one syncfs, not one fdatasync each: a 64K-token
  // document has 512 blocks, and a sync apiece took longer than prefilling it), before the
  // manifest that names them.
  for (size_t i = 0; i < manifest.chain.size(); ++i) {
    const BlockKey& block = manifest.chain[i];
    if (blocks_.count(block) != 0) continue;
    const absl::Status written = WriteFileAtomically(
        BlockPath(block),
        SerializeKvBlockFile(block, rows(i), config_, fingerprint_, options_.cache_key),
        /*sync=*/false);
    if (!written.ok()) {
      release();
      return written;
    }
    blocks_[block] = 1;
    bytes_ += block_bytes_;
    held.push_back(block);
  }
  // Durable: synced even when every block was already there, since blocks a spill wrote were
  // not.
  if (durable) {
    if (absl::Status synced = SyncFolder(options_.dir); !synced.ok()) {
      release();
      return synced;
    }
  }
  if (absl::Status written = WriteFileAtomically(ManifestPath(key), bytes, durable);
      !written.ok()) {
    release();
    return written;
  }
  if (existing != entries_.end()) {  // rewritten: its references stand, the holds go
    Entry& e = existing->second;
    bytes_ += size - e.manifest_bytes;
    e.manifest_bytes = size;
    e.info = InfoOf(manifest, size + static_cast<int64_t>(e.chain.size()) * block_bytes_);
    e.last_use = ++use_clock_;
    release();
    return e.info;
  }
  Entry& e = entries_[key];
  e.chain = manifest.chain;
  e.manifest_bytes = size;
  e.info = InfoOf(manifest, size + static_cast<int64_t>(e.chain.size()) * block_bytes_);
  e.last_use = ++use_clock_;
  bytes_ += size;
  return e.info;
}

absl::StatusOr<DiskSnapshotInfo> SnapshotDiskTier::Put(const SnapshotFile& file,
                                                       std::vector<BlockKey>* evicted) {
  SnapshotManifest manifest;
  manifest.chain = file.chain;
  manifest.first_block.assign(file.tokens.begin(), file.tokens.begin() + kCacheBlockTokens);
  manifest.self_states = file.state.self_states;
  manifest.pinned = file.pinned;
  manifest.expires = file.expires;
  return Put(
      manifest,
      [&](size_t i) {
        return KvBlockRowsOf(file.tokens, file.state.shared_k, file.state.shared_v,
                             static_cast<int64_t>(i) * kCacheBlockTokens);
      },
      evicted);
}

absl::StatusOr<SnapshotFile> SnapshotDiskTier::Load(const BlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return absl::NotFoundError("no such snapshot on disk");
  absl::StatusOr<std::string> bytes =
      ReadSnapshotBytes(ManifestPath(key), config_, options_.budget_bytes);
  absl::StatusOr<SnapshotManifest> manifest =
      !bytes.ok() ? absl::StatusOr<SnapshotManifest>(bytes.status())
      : SnapshotFileVersion(*bytes) != SnapshotManifest::kVersion
          ? absl::StatusOr<SnapshotManifest>(
                absl::DataLossError("the snapshot file was replaced by one of another version"))
          : ParseSnapshotManifest(*bytes, config_, fingerprint_, options_.cache_key);
  if (manifest.ok() && manifest->chain != it->second.chain) {
    manifest = absl::DataLossError("the file's name and contents disagree");
  }
  if (!manifest.ok()) {
    Erase(it);
    return manifest.status();
  }
  SnapshotFile file;
  file.chain = manifest->chain;
  file.pinned = manifest->pinned;
  file.expires = manifest->expires;
  const int64_t n = static_cast<int64_t>(file.chain.size()) * kCacheBlockTokens;
  file.tokens.reserve(n);
  file.state.position = n;
  file.state.self_states = std::move(manifest->self_states);
  file.state.shared_k = KvRows::SharedKeys(config_.kv_dtype, config_.kv_dim());
  file.state.shared_v = KvRows::SharedValues(config_.kv_dtype, config_.kv_dim());
  file.state.shared_k.Reserve(n);
  file.state.shared_v.Reserve(n);
  for (const BlockKey& block : file.chain) {
    absl::StatusOr<std::string> block_bytes = ReadExactFile(BlockPath(block), block_bytes_);
    absl::StatusOr<KvBlockRows> rows =
        block_bytes.ok()
            ? ParseKvBlockFile(*block_bytes, block, config_, fingerprint_, options_.cache_key)
            : absl::StatusOr<KvBlockRows>(block_bytes.status());
    if (rows.ok() && file.tokens.empty() && rows->tokens != manifest->first_block) {
      rows = absl::DataLossError("the first block's tokens and the manifest's disagree");
    }
    if (!rows.ok()) {
      // Useless to every snapshot that shares it: gone now, so theirs fail at once too.
      std::error_code ignored;
      std::filesystem::remove(BlockPath(block), ignored);
      Erase(it);
      return rows.status();
    }
    file.tokens.insert(file.tokens.end(), rows->tokens.begin(), rows->tokens.end());
    file.state.shared_k.AppendRowBytes(reinterpret_cast<const uint8_t*>(rows->k.data()),
                                       kCacheBlockTokens);
    file.state.shared_v.AppendRowBytes(reinterpret_cast<const uint8_t*>(rows->v.data()),
                                       kCacheBlockTokens);
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
