// State bundle encoding. The checksum is verified before any field is trusted, so a flipped
// byte anywhere is reported as corruption rather than as a misleading field error.
#include "lib/engine/state_bundle.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/checksum/crc32c.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'B', 'N', 'D', 'L'};
constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 4 + 8 + 4 + 4 + 8 + 4 + 4 + 4 + 4 + 8 + 4;
constexpr uint32_t kMaxStopTokens = 1024;

// Writes into memory of the bundle's exact size.
class Writer {
 public:
  explicit Writer(uint8_t* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    PutBytes(&v, sizeof v);
  }
  void PutBytes(const void* p, size_t n) {
    if (n == 0) return;  // p may be null
    std::memcpy(out_ + pos_, p, n);
    pos_ += n;
  }
  void PutFloats(const std::vector<float>& v) { PutBytes(v.data(), v.size() * sizeof(float)); }
  // Rows [row0, rows.rows()).
  void PutRows(const KvRows& rows, int64_t row0) {
    const int64_t n = rows.rows() - row0;
    if (n <= 0) return;
    rows.CopyRowBytes(row0, n, out_ + pos_);
    pos_ += n * rows.width() * KvDtypeBytes(rows.dtype());
  }
  size_t pos() const { return pos_; }

 private:
  uint8_t* out_;
  size_t pos_ = 0;
};

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  void GetFloats(std::vector<float>* v, size_t n) {
    v->resize(n);
    if (n == 0) return;  // memcpy of a null pointer is undefined even for 0 bytes
    std::memcpy(v->data(), in_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
  }
  void GetRows(KvRows* rows, int64_t n) {
    rows->Resize(0);
    rows->AppendRowBytes(reinterpret_cast<const uint8_t*>(in_.data() + pos_), n);
    pos_ += rows->bytes();
  }

 private:
  absl::string_view in_;
  size_t pos_ = 0;
};

// Rows a bundle leaves out: its resident chunks' (named bundles only).
int64_t ResidentRows(const StateBundle& b) {
  return b.chunk_names.empty() ? 0 : b.resident_chunks * KvRows::kChunkRows;
}

}  // namespace

size_t SerializedStateBundleBytes(const StateBundle& b) {
  const int64_t carried = b.state.shared_k.rows() - ResidentRows(b);
  size_t bytes = kFixedHeaderBytes + 4 * b.sampling.stop_token_ids.size() +
                 (b.chunk_names.empty() ? 0 : 8 + 16 * b.chunk_names.size()) +
                 2 * std::max<int64_t>(carried, 0) * b.state.shared_k.width() *
                     KvDtypeBytes(b.state.shared_k.dtype()) +
                 4;
  for (const auto& s : b.state.self_states) bytes += 4 * s.size();
  return bytes;
}

void SerializeStateBundleTo(const StateBundle& b, uint8_t* out) {
  const bool named = !b.chunk_names.empty();
  Writer w(out);
  w.PutBytes(kMagic, sizeof kMagic);
  w.Put<uint32_t>(named ? 2 : 1);
  w.Put<uint32_t>(0);
  w.Put<uint64_t>(b.model_fingerprint);
  const uint64_t state_floats = b.state.self_states.empty() ? 0 : b.state.self_states[0].size();
  const uint32_t kv_dim = b.state.position > 0
                              ? static_cast<uint32_t>(b.state.shared_k.values() / b.state.position)
                              : 0;
  w.Put<uint32_t>(static_cast<uint32_t>(b.state.self_states.size()));
  w.Put<uint64_t>(state_floats);
  w.Put<uint32_t>(kv_dim);
  w.Put<uint32_t>(static_cast<uint32_t>(b.state.shared_k.dtype()));
  w.Put<uint64_t>(static_cast<uint64_t>(b.state.position));
  w.Put<int32_t>(b.pending_token);
  w.Put<float>(b.sampling.temperature);
  w.Put<int32_t>(b.sampling.top_k);
  w.Put<float>(b.sampling.top_p);
  w.Put<uint64_t>(b.sampling.seed);
  w.Put<uint32_t>(static_cast<uint32_t>(b.sampling.stop_token_ids.size()));
  for (int32_t id : b.sampling.stop_token_ids) w.Put<int32_t>(id);
  if (named) {
    w.Put<uint32_t>(static_cast<uint32_t>(b.chunk_names.size()));
    w.Put<uint32_t>(static_cast<uint32_t>(b.resident_chunks));
    for (const ChunkName& name : b.chunk_names) w.PutBytes(name.data(), name.size());
  }
  w.PutRows(b.state.shared_k, ResidentRows(b));
  w.PutRows(b.state.shared_v, ResidentRows(b));
  for (const auto& s : b.state.self_states) w.PutFloats(s);
  w.Put<uint32_t>(Crc32c(out, w.pos()));
}

std::string SerializeStateBundle(const StateBundle& b) {
  std::string out(SerializedStateBundleBytes(b), '\0');
  SerializeStateBundleTo(b, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

uint64_t StateBundleBytes(const ModelConfig& config, uint64_t position, uint64_t stop_tokens,
                          uint64_t names, uint64_t resident) {
  const uint64_t carried = position - resident * KvRows::kChunkRows;
  const uint64_t kv_values = carried * static_cast<uint64_t>(config.kv_dim());
  return kFixedHeaderBytes + 4 * stop_tokens + (names > 0 ? 8 + 16 * names : 0) +
         2 * kv_values * KvDtypeBytes(config.kv_dtype) +
         4 * static_cast<uint64_t>(config.n_self_layers()) *
             static_cast<uint64_t>(config.self_state_floats()) +
         4;
}

absl::StatusOr<StateBundle> ParseStateBundle(absl::string_view bytes, const ModelConfig& config,
                                             uint64_t fingerprint) {
  if (bytes.size() < kFixedHeaderBytes + 4) {
    return absl::DataLossError(
        absl::StrCat("state bundle: ", bytes.size(), " bytes is too short (truncated)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return absl::InvalidArgumentError("state bundle: bad magic (not a state bundle)");
  }
  Reader r(bytes.substr(sizeof kMagic));
  const uint32_t version = r.Get<uint32_t>();
  if (version != 1 && version != StateBundle::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat("state bundle: version ", version,
                                                      " is not supported (this build reads ",
                                                      StateBundle::kVersion, ")"));
  }
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (Crc32c(bytes.data(), bytes.size() - 4) != stored_crc) {
    return absl::DataLossError("state bundle: checksum mismatch (corrupt or truncated)");
  }
  StateBundle b;
  // No flags are defined; a bundle that sets one was made by something else.
  if (const uint32_t flags = r.Get<uint32_t>(); flags != 0) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: unknown flags ", flags));
  }
  b.model_fingerprint = r.Get<uint64_t>();
  if (b.model_fingerprint != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat("state bundle: made by model ",
                                                      absl::Hex(b.model_fingerprint),
                                                      ", this is model ", absl::Hex(fingerprint)));
  }
  const uint32_t n_layers = r.Get<uint32_t>();
  const uint64_t state_floats = r.Get<uint64_t>();
  const uint32_t kv_dim = r.Get<uint32_t>();
  const uint32_t kv_dtype = r.Get<uint32_t>();
  const uint64_t position = r.Get<uint64_t>();
  if (n_layers != static_cast<uint32_t>(config.n_self_layers()) ||
      state_floats != static_cast<uint64_t>(config.self_state_floats()) ||
      kv_dim != (position > 0 ? static_cast<uint32_t>(config.kv_dim()) : 0)) {
    return absl::InvalidArgumentError("state bundle: state shapes do not match this model");
  }
  if (kv_dtype != static_cast<uint32_t>(config.kv_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("state bundle: K/V dtype ", kv_dtype, ", this worker holds K/V in ",
                     KvDtypeName(config.kv_dtype), " (--kv-dtype must match across workers)"));
  }
  b.pending_token = r.Get<int32_t>();
  b.sampling.temperature = r.Get<float>();
  b.sampling.top_k = r.Get<int32_t>();
  b.sampling.top_p = r.Get<float>();
  b.sampling.seed = r.Get<uint64_t>();
  const uint32_t n_stop = r.Get<uint32_t>();
  if (n_stop > kMaxStopTokens)
    return absl::InvalidArgumentError("state bundle: too many stop tokens");
  if (position > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: position ", position));
  }
  // The names' counts sit behind the stop ids: read them where they are once the ids fit.
  uint32_t n_names = 0, resident = 0;
  if (version == 2) {
    const size_t at = kFixedHeaderBytes + 4 * size_t{n_stop};
    if (bytes.size() < at + 8 + 4) {
      return absl::InvalidArgumentError("state bundle: truncated before its chunk names");
    }
    std::memcpy(&n_names, bytes.data() + at, 4);
    std::memcpy(&resident, bytes.data() + at + 4, 4);
    if (n_names == 0 || n_names > position / KvRows::kChunkRows || resident > n_names) {
      return absl::InvalidArgumentError(absl::StrCat(
          "state bundle: ", n_names, " chunk names (", resident, " left out) for position ",
          position, " (at most one per full chunk of ", KvRows::kChunkRows, " rows)"));
    }
  }
  if (const uint64_t want = StateBundleBytes(config, position, n_stop, n_names, resident);
      bytes.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state bundle: ", bytes.size(), " bytes, expected ", want, " for position ", position));
  }
  for (uint32_t i = 0; i < n_stop; ++i) b.sampling.stop_token_ids.push_back(r.Get<int32_t>());
  if (version == 2) {
    r.Get<uint32_t>();
    r.Get<uint32_t>();
    b.chunk_names.resize(n_names);
    for (ChunkName& name : b.chunk_names) name = r.Get<ChunkName>();
    b.resident_chunks = resident;
  }
  if (b.pending_token < -1 || b.pending_token >= config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("state bundle: pending token ", b.pending_token, " out of range"));
  }
  if (absl::Status st = b.sampling.Validate(config.vocab_size); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: ", st.message()));
  }
  b.state.position = static_cast<int64_t>(position);
  b.state.shared_k = KvRows::SharedKeys(config.kv_dtype, config.kv_dim());
  b.state.shared_v = KvRows::SharedValues(config.kv_dtype, config.kv_dim());
  const int64_t carried = b.state.position - b.resident_chunks * KvRows::kChunkRows;
  r.GetRows(&b.state.shared_k, carried);
  r.GetRows(&b.state.shared_v, carried);
  b.state.self_states.resize(n_layers);
  for (auto& s : b.state.self_states) r.GetFloats(&s, state_floats);
  return b;
}

}  // namespace yoco
