// Snapshot file and manifest encoding; the seal (CRC and tag) is verified before any field is
// trusted. Both share their header, chain and tokens.
#include "lib/cache/snapshot_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/cache/file_fields.h"
#include "lib/checksum/file_seal.h"
#include "lib/engine/state_bundle.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'S', 'N', 'A', 'P'};
constexpr size_t kHeaderBytes = kSnapshotFileHeaderBytes;
constexpr char kWhat[] = "snapshot file";

absl::Status CheckVersion(absl::string_view bytes, uint32_t want) {
  const uint32_t version = SnapshotFileVersion(bytes);
  if (version != want) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot file version ", version, " is not supported"));
  }
  return absl::OkStatus();
}

// What both versions start with.
struct Header {
  bool pinned = false;
  absl::Time expires = absl::InfiniteFuture();
  std::vector<BlockKey> chain;
  std::vector<int32_t> tokens;
};

void PutHeader(uint32_t version, bool pinned, absl::Time expires,
               const std::vector<BlockKey>& chain, const std::vector<int32_t>& tokens,
               std::string* out) {
  out->assign(kMagic, sizeof kMagic);
  PutField<uint32_t>(out, version);
  PutField<uint32_t>(out, pinned ? 1u : 0u);
  PutField<int64_t>(out, expires == absl::InfiniteFuture() ? 0 : absl::ToUnixMillis(expires));
  PutField<uint32_t>(out, static_cast<uint32_t>(chain.size()));
  for (const BlockKey& k : chain) {
    out->append(reinterpret_cast<const char*>(k.bytes.data()), k.bytes.size());
  }
  out->append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
}

// The header of sealed `bytes` of `version`; `pos` ends after the tokens (every block's in
// version 2, the first block's in 3). `min_rest`: bytes the version needs after the tokens and
// before the seal.
absl::StatusOr<Header> ParseHeader(absl::string_view bytes, uint32_t version,
                                   absl::string_view cache_key, size_t min_rest, size_t* pos) {
  if (bytes.size() < kHeaderBytes + min_rest + kFileSealBytes ||
      std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a snapshot file, or truncated");
  }
  if (absl::Status st = CheckFileSeal(bytes, cache_key, kWhat); !st.ok()) return st;
  if (absl::Status st = CheckVersion(bytes, version); !st.ok()) return st;
  *pos = 12;
  Header h;
  const uint32_t flags = GetField<uint32_t>(bytes, pos);
  if (flags > 1u) return absl::InvalidArgumentError("snapshot file: unknown flags");
  h.pinned = flags == 1u;
  const int64_t expires_ms = GetField<int64_t>(bytes, pos);
  h.expires = expires_ms == 0 ? absl::InfiniteFuture() : absl::FromUnixMillis(expires_ms);
  const uint64_t blocks = GetField<uint32_t>(bytes, pos);
  if (blocks == 0) return absl::InvalidArgumentError("snapshot file: no blocks");
  const uint64_t token_blocks = version == SnapshotFile::kVersion ? blocks : 1;
  if (bytes.size() <
      *pos + blocks * 16 + token_blocks * 4 * kCacheBlockTokens + min_rest + kFileSealBytes) {
    return absl::InvalidArgumentError("snapshot file: sizes do not add up");
  }
  h.chain.resize(blocks);
  for (BlockKey& k : h.chain) {
    std::memcpy(k.bytes.data(), bytes.data() + *pos, k.bytes.size());
    *pos += k.bytes.size();
  }
  h.tokens.resize(token_blocks * kCacheBlockTokens);
  std::memcpy(h.tokens.data(), bytes.data() + *pos, h.tokens.size() * 4);
  *pos += h.tokens.size() * 4;
  return h;
}

}  // namespace

uint32_t SnapshotFileVersion(absl::string_view header) {
  size_t pos = 8;
  return GetField<uint32_t>(header, &pos);
}

std::string SerializeSnapshotFile(const SnapshotFile& file, uint64_t model_fingerprint,
                                  absl::string_view cache_key) {
  StateBundle bundle;
  bundle.model_fingerprint = model_fingerprint;
  bundle.state = file.state;
  const std::string body = SerializeStateBundle(bundle);
  std::string out;
  PutHeader(SnapshotFile::kVersion, file.pinned, file.expires, file.chain, file.tokens, &out);
  PutField<uint64_t>(&out, body.size());
  out += body;
  AppendFileSeal(cache_key, &out);
  return out;
}

absl::StatusOr<uint64_t> SnapshotFileBytes(absl::string_view header, const ModelConfig& config) {
  if (header.size() < kHeaderBytes || std::memcmp(header.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a snapshot file, or truncated");
  }
  const uint32_t version = SnapshotFileVersion(header);
  if (version != SnapshotFile::kVersion && version != SnapshotManifest::kVersion) {
    return CheckVersion(header, SnapshotFile::kVersion);
  }
  size_t pos = kHeaderBytes - 4;
  const uint64_t blocks = GetField<uint32_t>(header, &pos);
  const uint64_t tokens = blocks * kCacheBlockTokens;
  if (version == SnapshotManifest::kVersion) {
    return kHeaderBytes + blocks * 16 + 4 * kCacheBlockTokens + 8 + 4 + 8 +
           4 * static_cast<uint64_t>(config.n_self_layers()) * config.self_state_floats() +
           kFileSealBytes;
  }
  return kHeaderBytes + blocks * (16 + 4 * kCacheBlockTokens) + 8 +
         StateBundleBytes(config, tokens, 0) + kFileSealBytes;
}

absl::StatusOr<SnapshotFile> ParseSnapshotFile(absl::string_view bytes, const ModelConfig& config,
                                               uint64_t model_fingerprint,
                                               absl::string_view cache_key) {
  size_t pos = 0;
  absl::StatusOr<Header> header =
      ParseHeader(bytes, SnapshotFile::kVersion, cache_key, /*min_rest=*/8, &pos);
  if (!header.ok()) return header.status();
  SnapshotFile file;
  file.pinned = header->pinned;
  file.expires = header->expires;
  file.chain = std::move(header->chain);
  file.tokens = std::move(header->tokens);
  const uint64_t body_bytes = GetField<uint64_t>(bytes, &pos);
  if (body_bytes != bytes.size() - kFileSealBytes - pos) {
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

std::string SerializeSnapshotManifest(const SnapshotManifest& manifest, uint64_t model_fingerprint,
                                      absl::string_view cache_key) {
  std::string out;
  PutHeader(SnapshotManifest::kVersion, manifest.pinned, manifest.expires, manifest.chain,
            manifest.first_block, &out);
  PutField<uint64_t>(&out, model_fingerprint);
  PutField<uint32_t>(&out, static_cast<uint32_t>(manifest.self_states.size()));
  PutField<uint64_t>(&out, manifest.self_states.empty() ? 0 : manifest.self_states[0].size());
  for (const std::vector<float>& layer : manifest.self_states) {
    out.append(reinterpret_cast<const char*>(layer.data()), layer.size() * 4);
  }
  AppendFileSeal(cache_key, &out);
  return out;
}

absl::StatusOr<SnapshotManifest> ParseSnapshotManifest(absl::string_view bytes,
                                                       const ModelConfig& config,
                                                       uint64_t model_fingerprint,
                                                       absl::string_view cache_key) {
  size_t pos = 0;
  absl::StatusOr<Header> header =
      ParseHeader(bytes, SnapshotManifest::kVersion, cache_key, /*min_rest=*/8 + 4 + 8, &pos);
  if (!header.ok()) return header.status();
  absl::StatusOr<uint64_t> expected = SnapshotFileBytes(bytes.substr(0, kHeaderBytes), config);
  if (!expected.ok()) return expected.status();
  if (*expected != bytes.size()) {
    return absl::InvalidArgumentError("snapshot file: sizes do not add up");
  }
  SnapshotManifest m;
  m.pinned = header->pinned;
  m.expires = header->expires;
  m.chain = std::move(header->chain);
  m.first_block = std::move(header->tokens);
  if (GetField<uint64_t>(bytes, &pos) != model_fingerprint) {
    return absl::FailedPreconditionError("snapshot file of another model");
  }
  const uint32_t layers = GetField<uint32_t>(bytes, &pos);
  const uint64_t floats = GetField<uint64_t>(bytes, &pos);
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

}  // namespace yoco
