// Snapshot file encoding; the outer checksum is verified before any field is trusted.
#include "lib/cache/snapshot_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/checksum/crc32c.h"
#include "lib/checksum/message_tag.h"
#include "lib/engine/state_bundle.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'S', 'N', 'A', 'P'};
constexpr size_t kHeaderBytes = kSnapshotFileHeaderBytes;
constexpr size_t kTrailerBytes = 4 + kMessageTagBytes;  // CRC, tag

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T Get(absl::string_view in, size_t* pos) {
  T v;
  std::memcpy(&v, in.data() + *pos, sizeof v);
  *pos += sizeof v;
  return v;
}

absl::Status CheckVersion(absl::string_view bytes, uint32_t want = SnapshotFile::kVersion) {
  size_t pos = 8;
  const uint32_t version = Get<uint32_t>(bytes, &pos);
  if (version != want) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot file version ", version, " is not supported"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string SerializeSnapshotFile(const SnapshotFile& file, uint64_t model_fingerprint,
                                  absl::string_view cache_key) {
  StateBundle bundle;
  bundle.model_fingerprint = model_fingerprint;
  bundle.state = file.state;
  const std::string body = SerializeStateBundle(bundle);
  std::string out(kMagic, sizeof kMagic);
  Put<uint32_t>(&out, SnapshotFile::kVersion);
  Put<uint32_t>(&out, file.pinned ? 1u : 0u);
  Put<int64_t>(&out, file.expires == absl::InfiniteFuture() ? 0 : absl::ToUnixMillis(file.expires));
  Put<uint32_t>(&out, static_cast<uint32_t>(file.chain.size()));
  for (const BlockKey& k : file.chain) {
    out.append(reinterpret_cast<const char*>(k.bytes.data()), k.bytes.size());
  }
  out.append(reinterpret_cast<const char*>(file.tokens.data()), file.tokens.size() * 4);
  Put<uint64_t>(&out, body.size());
  out += body;
  Put<uint32_t>(&out, Crc32c(out.data(), out.size()));
  out += MessageTag(cache_key, out);
  return out;
}

uint32_t SnapshotFileVersion(absl::string_view header) {
  size_t pos = 8;
  return Get<uint32_t>(header, &pos);
}

absl::StatusOr<uint64_t> SnapshotFileBytes(absl::string_view header, const ModelConfig& config) {
  if (header.size() < kHeaderBytes || std::memcmp(header.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a snapshot file, or truncated");
  }
  const uint32_t version = SnapshotFileVersion(header);
  if (version != SnapshotFile::kVersion && version != SnapshotManifest::kVersion) {
    return CheckVersion(header);
  }
  size_t pos = kHeaderBytes - 4;
  const uint64_t blocks = Get<uint32_t>(header, &pos);
  const uint64_t tokens = blocks * kCacheBlockTokens;
  const uint64_t fixed = kHeaderBytes + blocks * (16 + 4 * kCacheBlockTokens);
  if (version == SnapshotManifest::kVersion) {
    return fixed + 8 + 4 + 8 +
           4 * static_cast<uint64_t>(config.n_self_layers()) * config.self_state_floats() +
           kTrailerBytes;
  }
  return fixed + 8 + StateBundleBytes(config, tokens, 0) + kTrailerBytes;
}

std::string SerializeSnapshotManifest(const SnapshotManifest& manifest, uint64_t model_fingerprint,
                                      absl::string_view cache_key) {
  std::string out(kMagic, sizeof kMagic);
  Put<uint32_t>(&out, SnapshotManifest::kVersion);
  Put<uint32_t>(&out, manifest.pinned ? 1u : 0u);
  Put<int64_t>(
      &out, manifest.expires == absl::InfiniteFuture() ? 0 : absl::ToUnixMillis(manifest.expires));
  Put<uint32_t>(&out, static_cast<uint32_t>(manifest.chain.size()));
  for (const BlockKey& k : manifest.chain) {
    out.append(reinterpret_cast<const char*>(k.bytes.data()), k.bytes.size());
  }
  out.append(reinterpret_cast<const char*>(manifest.tokens.data()), manifest.tokens.size() * 4);
  Put<uint64_t>(&out, model_fingerprint);
  Put<uint32_t>(&out, static_cast<uint32_t>(manifest.self_states.size()));
  Put<uint64_t>(&out, manifest.self_states.empty() ? 0 : manifest.self_states[0].size());
  for (const std::vector<float>& layer : manifest.self_states) {
    out.append(reinterpret_cast<const char*>(layer.data()), layer.size() * 4);
  }
  Put<uint32_t>(&out, Crc32c(out.data(), out.size()));
  out += MessageTag(cache_key, out);
  return out;
}

absl::StatusOr<SnapshotManifest> ParseSnapshotManifest(absl::string_view bytes,
                                                       const ModelConfig& config,
                                                       uint64_t model_fingerprint,
                                                       absl::string_view cache_key) {
  if (bytes.size() < kHeaderBytes + kTrailerBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a snapshot file, or truncated");
  }
  const size_t crc_at = bytes.size() - kTrailerBytes;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + crc_at, 4);
  if (Crc32c(bytes.data(), crc_at) != stored_crc) {
    return absl::DataLossError("snapshot file checksum mismatch (corrupt or truncated)");
  }
  if (!MessageTagMatches(cache_key, bytes.substr(0, crc_at + 4), bytes.substr(crc_at + 4))) {
    return absl::UnauthenticatedError(
        cache_key.empty() ? "snapshot file was written under a cache key and this worker has none"
                          : "snapshot file is not authenticated by this worker's cache key "
                            "(changed or made without it)");
  }
  if (absl::Status st = CheckVersion(bytes, SnapshotManifest::kVersion); !st.ok()) return st;
  absl::StatusOr<uint64_t> expected = SnapshotFileBytes(bytes.substr(0, kHeaderBytes), config);
  if (!expected.ok()) return expected.status();
  if (*expected != bytes.size()) {
    return absl::InvalidArgumentError("snapshot file: sizes do not add up");
  }
  size_t pos = 12;
  SnapshotManifest m;
  const uint32_t flags = Get<uint32_t>(bytes, &pos);
  if (flags > 1u) return absl::InvalidArgumentError("snapshot file: unknown flags");
  m.pinned = flags == 1u;
  const int64_t expires_ms = Get<int64_t>(bytes, &pos);
  m.expires = expires_ms == 0 ? absl::InfiniteFuture() : absl::FromUnixMillis(expires_ms);
  const uint64_t blocks = Get<uint32_t>(bytes, &pos);
  if (blocks == 0) return absl::InvalidArgumentError("snapshot file: no blocks");
  m.chain.resize(blocks);
  for (BlockKey& k : m.chain) {
    std::memcpy(k.bytes.data(), bytes.data() + pos, k.bytes.size());
    pos += k.bytes.size();
  }
  m.tokens.resize(blocks * kCacheBlockTokens);
  std::memcpy(m.tokens.data(), bytes.data() + pos, m.tokens.size() * 4);
  pos += m.tokens.size() * 4;
  if (Get<uint64_t>(bytes, &pos) != model_fingerprint) {
    return absl::FailedPreconditionError("snapshot file of another model");
  }
  const uint32_t layers = Get<uint32_t>(bytes, &pos);
  const uint64_t floats = Get<uint64_t>(bytes, &pos);
  if (layers != static_cast<uint32_t>(config.n_self_layers()) ||
      floats != static_cast<uint64_t>(config.self_state_floats())) {
    return absl::InvalidArgumentError("snapshot file: states of another shape");
  }
  m.self_states.assign(layers, std::vector<float>(floats));
  for (std::vector<float>& layer : m.self_states) {
    std::memcpy(layer.data(), bytes.data() + pos, floats * 4);
    pos += floats * 4;
  }
  return m;
}

absl::StatusOr<SnapshotFile> ParseSnapshotFile(absl::string_view bytes, const ModelConfig& config,
                                               uint64_t model_fingerprint,
                                               absl::string_view cache_key) {
  if (bytes.size() < kHeaderBytes + 8 + kTrailerBytes ||
      std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a snapshot file, or truncated");
  }
  const size_t crc_at = bytes.size() - kTrailerBytes;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + crc_at, 4);
  if (Crc32c(bytes.data(), crc_at) != stored_crc) {
    return absl::DataLossError("snapshot file checksum mismatch (corrupt or truncated)");
  }
  if (!MessageTagMatches(cache_key, bytes.substr(0, crc_at + 4), bytes.substr(crc_at + 4))) {
    return absl::UnauthenticatedError(
        cache_key.empty() ? "snapshot file was written under a cache key and this worker has none"
                          : "snapshot file is not authenticated by this worker's cache key "
                            "(changed or made without it)");
  }
  if (absl::Status st = CheckVersion(bytes); !st.ok()) return st;
  size_t pos = 12;
  SnapshotFile file;
  const uint32_t flags = Get<uint32_t>(bytes, &pos);
  if (flags > 1u) return absl::InvalidArgumentError("snapshot file: unknown flags");
  file.pinned = flags == 1u;
  const int64_t expires_ms = Get<int64_t>(bytes, &pos);
  file.expires = expires_ms == 0 ? absl::InfiniteFuture() : absl::FromUnixMillis(expires_ms);
  const uint64_t blocks = Get<uint32_t>(bytes, &pos);
  if (blocks == 0) return absl::InvalidArgumentError("snapshot file: no blocks");
  const uint64_t fixed = blocks * (16 + 4 * kCacheBlockTokens);
  if (bytes.size() < pos + fixed + 8 + kTrailerBytes) {
    return absl::InvalidArgumentError("snapshot file: sizes do not add up");
  }
  file.chain.resize(blocks);
  for (BlockKey& k : file.chain) {
    std::memcpy(k.bytes.data(), bytes.data() + pos, k.bytes.size());
    pos += k.bytes.size();
  }
  file.tokens.resize(blocks * kCacheBlockTokens);
  std::memcpy(file.tokens.data(), bytes.data() + pos, file.tokens.size() * 4);
  pos += file.tokens.size() * 4;
  const uint64_t body_bytes = Get<uint64_t>(bytes, &pos);
  if (body_bytes != bytes.size() - kTrailerBytes - pos) {
    return absl::InvalidArgumentError("snapshot file: sizes do not add up");
  }
  absl::StatusOr<StateBundle> bundle =
      ParseStateBundle(bytes.substr(pos, body_bytes), config, model_fingerprint);
  if (!bundle.ok()) return bundle.status();
  if (bundle->state.position != static_cast<int64_t>(file.tokens.size())) {
    return absl::InvalidArgumentError("snapshot file: the state does not sit at its last block");
  }
  file.state = std::move(bundle->state);
  return file;
}

}  // namespace yoco
