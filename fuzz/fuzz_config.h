// The model shape every fuzz target parses against: small, so inputs that fit it are small.
#ifndef YOCO_FUZZ_FUZZ_CONFIG_H_
#define YOCO_FUZZ_FUZZ_CONFIG_H_

#include <cstdint>
#include <string>

#include "lib/model/model_config.h"

namespace yoco::fuzz {

inline constexpr uint64_t kFingerprint = 0x0123456789abcdefull;
inline constexpr char kCacheKey[] = "fuzz-cache-key-0123456789";

inline const ModelConfig& Config() {
  static const ModelConfig config = [] {
    ModelConfig c;
    c.dim = 16;
    c.n_layers = 2;
    c.hidden_dim = 32;
    c.n_self_heads = 2;
    c.n_attn_heads = 2;
    c.n_attn_kv_heads = 1;
    c.vocab_size = 64;
    c.max_seq_len = 1024;
    return c;
  }();
  return config;
}

// The same shape with the shared K/V held in bf16 (bundles and snapshot files then hold bf16
// rows: the parsers are fuzzed against both).
inline const ModelConfig& Bf16KvConfig() {
  static const ModelConfig config = [] {
    ModelConfig c = Config();
    c.kv_dtype = KvDtype::kBF16;
    return c;
  }();
  return config;
}

// Checksummed formats: the last four bytes become the CRC-32C of the rest, so that mutations get
// past the checksum into the parser behind it.
void FixTrailingCrc(std::string& bytes);

// Snapshot files: the CRC-32C and then the tag under kCacheKey at their end, recomputed.
void FixSnapshotTrailer(std::string& bytes);

}  // namespace yoco::fuzz

#endif  // YOCO_FUZZ_FUZZ_CONFIG_H_
