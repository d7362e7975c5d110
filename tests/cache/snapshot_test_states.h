// Synthetic decoding states and snapshot sizes for the prefix-cache tests: a snapshot's contents
// do not matter to the store, only its shape and that it comes back bit for bit.
#ifndef YOCO_TESTS_CACHE_SNAPSHOT_TEST_STATES_H_
#define YOCO_TESTS_CACHE_SNAPSHOT_TEST_STATES_H_

#include <random>
#include <vector>

#include "lib/cache/block_key.h"
#include "lib/engine/sequence_state.h"
#include "lib/model/model_config.h"

namespace yoco::testing {

// A state after `n` tokens with random contents.
inline SequenceState RandomState(const ModelConfig& config, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  SequenceState s = SequenceState::Create(config);
  s.position = n;
  std::vector<float> rows(n * config.kv_dim());
  for (KvRows* kv : {&s.shared_k, &s.shared_v}) {
    for (float& x : rows) x = d(rng);
    kv->Append(rows.data(), n);  // rounded when the config holds bf16
  }
  for (auto& layer : s.self_states)
    for (float& x : layer) x = d(rng);
  return s;
}

// What SnapshotStore counts for one block of K/V (with its tokens) and for one snapshot's
// self-decoder states.
inline int64_t SnapshotBlockBytes(const ModelConfig& config) {
  return kCacheBlockTokens * (2 * config.kv_dim() * KvDtypeBytes(config.kv_dtype) + 4);
}
inline int64_t SnapshotStateBytes(const ModelConfig& config) {
  return config.n_self_layers() * config.self_state_floats() * 4;
}

}  // namespace yoco::testing

#endif  // YOCO_TESTS_CACHE_SNAPSHOT_TEST_STATES_H_
