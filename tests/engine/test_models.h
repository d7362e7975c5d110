// Small random models for engine tests, written to a temporary checkpoint folder and loaded
// through the real loader.
#ifndef YOCO_TESTS_ENGINE_TEST_MODELS_H_
#define YOCO_TESTS_ENGINE_TEST_MODELS_H_

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "lib/engine/model.h"
#include "lib/engine/random_model.h"
#include "lib/files/temp_folder.h"

namespace yoco::testing {

// dim 128, 4 layers, ds 64 (2 self heads), da 32 (4 heads over 2 KV heads), vocab 96.
inline ModelConfig SmallConfig(std::optional<int> sliding_window = std::nullopt) {
  ModelConfig c;
  c.dim = 128;
  c.n_layers = 4;
  c.hidden_dim = 256;
  c.n_self_heads = 2;
  c.n_attn_heads = 4;
  c.n_attn_kv_heads = 2;
  c.vocab_size = 96;
  c.sliding_window = sliding_window;
  return c;
}

// Per process (CTest runs each test case in its own process, in parallel), removed when the
// process exits.
inline std::string TempModelDir(const std::string& name) {
  static const absl::StatusOr<TempFolder> root = TempFolder::Create("yoco_test_models");
  if (!root.ok()) {
    ADD_FAILURE() << root.status();
    return "/nonexistent/" + name;
  }
  return root->path() + "/" + name;
}

// Writes and loads a random model (held in `format`, K/V in config.kv_dtype); norm weights are
// random too so they are exercised.
inline std::shared_ptr<const Model> MakeModel(const ModelConfig& config, uint64_t seed,
                                              const std::string& name, DType dtype = DType::kF32,
                                              WeightFormat format = WeightFormat::kAsStored) {
  RandomModelOptions options;
  options.seed = seed;
  options.dtype = dtype;
  options.weight_std = 0.05;
  options.random_norms = true;
  const std::string dir = TempModelDir(name);
  absl::Status st = WriteRandomModel(config, options, dir);
  EXPECT_TRUE(st.ok()) << st;
  auto model = Model::Load(dir, format, config.kv_dtype);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

inline std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t[i] = 4 + static_cast<int32_t>(x % static_cast<uint64_t>(vocab - 4));
  }
  t[0] = 0;  // BOS
  return t;
}

}  // namespace yoco::testing

#endif  // YOCO_TESTS_ENGINE_TEST_MODELS_H_
