// Synthetic decoding states and snapshot sizes for the prefix-cache tests: a snapshot's contents
// do not matter to the store, only its shape and that it comes back bit for bit.
#ifndef YOCO_TESTS_CACHE_SNAPSHOT_TEST_STATES_H_
#define YOCO_TESTS_CACHE_SNAPSHOT_TEST_STATES_H_

#include <random>

#include "lib/cache/block_key.h"
#include "lib/engine/model_config.h"
#include "lib/engine/sequence_state.h"

namespace yoco::testing {

// A state after `n` tokens with random contents.
inline SequenceState RandomState(const ModelConfig& config, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  SequenceState s = SequenceState::Create(config);
  s.position = n;
  s.shared_k.resize(n * config.kv_dim());
  s.shared_v.resize(n * config.kv_dim());
  for (float& x : s.shared_k) x = d(rng);
  for (float& x : s.shared_v) x = d(rng);
  for (auto& layer : s.self_states)
    for (float& x : layer) x = d(rng);
  return s;
}

// What SnapshotStore counts for one block of K/V (with its tokens) and for one snapshot's
// self-decoder states.
inline int64_t SnapshotBlockBytes(const ModelConfig& config) {
  return kCacheBlockTokens * (2 * config.kv_dim() * 4 + 4);
}
inline int64_t SnapshotStateBytes(const ModelConfig& config) {
  return config.n_self_layers() * config.self_state_floats() * 4;
}

}  // namespace yoco::testing

#endif  // YOCO_TESTS_CACHE_SNAPSHOT_TEST_STATES_H_
