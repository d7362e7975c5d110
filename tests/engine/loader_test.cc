// Checkpoint loading: F32/BF16/F16 and sharded checkpoints load and agree; every defect (missing
// or unexpected tensor, wrong shape, unknown dtype, truncated file, oversized or malformed
// header, bad offsets, bad params.json) is a clear error naming what is wrong, never a crash.
// Hostile files (FIFOs, /dev/zero, absurd sizes, duplicate keys, deep nesting, overlapping
// tensors) are refused at once, before anything is allocated for them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/engine/model.h"
#include "lib/engine/safetensors.h"
#include "lib/engine/safetensors_writer.h"
#include "nlohmann/json.hpp"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

namespace fs = std::filesystem;
using testing::SmallConfig;
using testing::TempModelDir;

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A model folder whose params.json is fine and whose model.safetensors is `bytes`.
std::string FolderWith(const std::string& name, const std::string& bytes) {
  const std::string dir = TempModelDir("loader_" + name);
  fs::create_directories(dir);
  WriteFile(dir + "/params.json", SmallConfig().ToJson());
  WriteFile(dir + "/model.safetensors", bytes);
  return dir;
}

// Every tensor of SmallConfig as zeros, optionally edited first.
std::vector<TensorToWrite> AllTensors() {
  std::vector<TensorToWrite> t;
  for (const auto& [name, shape] : ModelWeights::ExpectedTensors(SmallConfig())) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.push_back({name, DType::kF32, shape, std::string(n * 4, '\0')});
  }
  return t;
}

void ExpectError(const std::string& dir, absl::StatusCode code, const std::string& mentions) {
  auto model = Model::Load(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), code) << model.status();
  EXPECT_NE(model.status().message().find(mentions), std::string::npos) << model.status();
}

TEST(LoaderTest, MissingTensorIsNamed) {
  auto t = AllTensors();
  t.erase(t.begin() + 5);
  const std::string missing = ModelWeights::ExpectedTensors(SmallConfig())[5].first;
  ExpectError(FolderWith("missing", EncodeSafetensors(t)), absl::StatusCode::kInvalidArgument,
              missing);
}

TEST(LoaderTest, UnexpectedTensorIsNamed) {
  auto t = AllTensors();
  t.push_back(
      {"self_decoder.layers.9.mixer.q_proj.weight", DType::kF32, {2}, std::string(8, '\0')});
  ExpectError(FolderWith("unexpected", EncodeSafetensors(t)), absl::StatusCode::kInvalidArgument,
              "self_decoder.layers.9.mixer.q_proj.weight");
}

TEST(LoaderTest, WrongShapeIsNamed) {
  auto t = AllTensors();
  for (auto& x : t) {
    if (x.name == "cross_decoder.k_proj.weight") {
      x.shape = {x.shape[1], x.shape[0]};
    }
  }
  ExpectError(FolderWith("shape", EncodeSafetensors(t)), absl::StatusCode::kInvalidArgument,
              "cross_decoder.k_proj.weight");
}

std::string EditHeader(const std::function<void(nlohmann::json&)>& edit) {
  const std::string file = EncodeSafetensors(AllTensors());
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(file[i]);
  nlohmann::json header = nlohmann::json::parse(file.substr(8, len));
  edit(header);
  std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  return out + text + file.substr(8 + len);
}

TEST(LoaderTest, UnknownDtypeIsNamed) {
  const auto bytes = EditHeader([](nlohmann::json& h) { h["layer_norm.weight"]["dtype"] = "I64"; });
  ExpectError(FolderWith("dtype", bytes), absl::StatusCode::kInvalidArgument, "I64");
}

TEST(LoaderTest, OffsetsInconsistentWithShape) {
  const auto bytes = EditHeader([](nlohmann::json& h) { h["layer_norm.weight"]["shape"] = {64}; });
  ExpectError(FolderWith("offsets", bytes), absl::StatusCode::kInvalidArgument,
              "layer_norm.weight");
}

TEST(LoaderTest, TruncatedFile) {
  const std::string file = EncodeSafetensors(AllTensors());
  ExpectError(FolderWith("truncated", file.substr(0, file.size() - 100)),
              absl::StatusCode::kDataLoss, "truncated");
  ExpectError(FolderWith("truncated_header", file.substr(0, 40)), absl::StatusCode::kDataLoss,
              "truncated");
  ExpectError(FolderWith("tiny", file.substr(0, 5)), absl::StatusCode::kDataLoss, "too short");
}

TEST(LoaderTest, OversizedHeader) {
  std::string file = EncodeSafetensors(AllTensors());
  const uint64_t huge = uint64_t{1} << 40;
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((huge >> (8 * i)) & 0xFF);
  ExpectError(FolderWith("oversized", file), absl::StatusCode::kInvalidArgument, "exceeds");
}

TEST(LoaderTest, MalformedHeader) {
  std::string file = EncodeSafetensors(AllTensors());
  file[8] = '[';
  file[9] = '[';
  ExpectError(FolderWith("malformed", file), absl::StatusCode::kInvalidArgument, "JSON");
  const auto not_object = EditHeader([](nlohmann::json& h) { h["layer_norm.weight"] = 7; });
  ExpectError(FolderWith("entry", not_object), absl::StatusCode::kInvalidArgument,
              "layer_norm.weight");
}

TEST(LoaderTest, BadParamsJson) {
  const std::string dir = FolderWith("params", EncodeSafetensors(AllTensors()));
  WriteFile(dir + "/params.json", "{\"dim\": 128,");
  ExpectError(dir, absl::StatusCode::kInvalidArgument, "params.json");
  fs::remove(dir + "/params.json");
  ExpectError(dir, absl::StatusCode::kNotFound, "params.json");
}

TEST(LoaderTest, NoWeightsFile) {
  const std::string dir = TempModelDir("loader_noweights");
  fs::create_directories(dir);
  WriteFile(dir + "/params.json", SmallConfig().ToJson());
  ExpectError(dir, absl::StatusCode::kNotFound, "model.safetensors");
}

std::vector<float> FirstLogits(const std::shared_ptr<const Model>& model) {
  CpuBackend backend(model);
  SequenceState state = SequenceState::Create(model->config());
  const auto tokens = testing::RandomTokens(30, model->config().vocab_size, 3);
  ForwardSegment seg{&state, tokens, LogitsMode::kAll};
  std::vector<float> logits;
  EXPECT_TRUE(backend.Forward({&seg, 1}, &logits).ok());
  return logits;
}

TEST(LoaderTest, Bf16AndF16CheckpointsLoadAndAgreeWithF32) {
  auto f32 = testing::MakeModel(SmallConfig(), 5, "dtype_f32");
  auto bf16 = testing::MakeModel(SmallConfig(), 5, "dtype_bf16", DType::kBF16);
  auto f16 = testing::MakeModel(SmallConfig(), 5, "dtype_f16", DType::kF16);
  ASSERT_TRUE(f32 && bf16 && f16);
  EXPECT_NE(f32->fingerprint(), bf16->fingerprint());
  const auto a = FirstLogits(f32), b = FirstLogits(bf16), c = FirstLogits(f16);
  double max_ref = 0, err_b = 0, err_c = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(a[i])));
    err_b = std::max(err_b, static_cast<double>(std::fabs(a[i] - b[i])));
    err_c = std::max(err_c, static_cast<double>(std::fabs(a[i] - c[i])));
  }
  // Rounding the weights changes logits at the weights' precision, not more.
  EXPECT_LT(err_b, 0.05 * max_ref);
  EXPECT_LT(err_c, 0.01 * max_ref);
  EXPECT_GT(err_b, 0.0);  // the bf16 file really holds rounded weights
}

TEST(LoaderTest, ShardedCheckpointEqualsSingleFile) {
  auto single = testing::MakeModel(SmallConfig(), 6, "shard_source");
  ASSERT_NE(single, nullptr);
  auto source = SafetensorsFile::Open(TempModelDir("shard_source") + "/model.safetensors");
  ASSERT_TRUE(source.ok());
  const std::string dir = TempModelDir("sharded");
  fs::create_directories(dir);
  WriteFile(dir + "/params.json", SmallConfig().ToJson());
  std::vector<TensorToWrite> shard[2];
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (const auto& [name, view] : source->tensors()) {
    const int s = i++ % 2;
    shard[s].push_back(
        {name, view.dtype, view.shape,
         std::string(reinterpret_cast<const char*>(view.data), view.num_elements() * 4)});
    index["weight_map"][name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00001-of-00002.safetensors", shard[0]).ok());
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00002-of-00002.safetensors", shard[1]).ok());
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  auto sharded = Model::Load(dir);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(FirstLogits(*sharded), FirstLogits(single));
  EXPECT_EQ((*sharded)->fingerprint(), single->fingerprint());

  // An index naming a tensor its shard does not hold is refused.
  auto& entry = index["weight_map"]["layer_norm.weight"];
  entry = entry == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                      : "model-00001-of-00002.safetensors";
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  auto bad = Model::Load(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer_norm.weight"), std::string::npos) << bad.status();
}

// --- Hostile files: each of these used to hang or abort the loader. ---

TEST(HostileModelFileTest, SpecialFilesAreRefusedAtOnce) {
  const std::string good = EncodeSafetensors(AllTensors());
  for (const std::string file : {"params.json", "model.safetensors"}) {
    for (const std::string kind : {"fifo", "devzero", "directory"}) {
      const std::string dir = FolderWith("special_" + kind + "_" + file.substr(0, 5), good);
      const std::string path = dir + "/" + file;
      fs::remove(path);
      if (kind == "fifo") {
        ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
      } else if (kind == "devzero") {
        fs::create_symlink("/dev/zero", path);
      } else {
        fs::create_directory(path);
      }
      auto model = Model::Load(dir);  // must return, not block on the FIFO or read forever
      ASSERT_FALSE(model.ok()) << file << " as " << kind;
      EXPECT_NE(model.status().message().find("not a regular file"), std::string::npos)
          << model.status();
    }
  }
  const std::string dir = FolderWith("special_index", good);
  fs::remove(dir + "/model.safetensors");
  fs::create_symlink("/dev/zero", dir + "/model.safetensors.index.json");
  ExpectError(dir, absl::StatusCode::kInvalidArgument, "not a regular file");
}

TEST(HostileModelFileTest, OversizedParamsJsonIsRefused) {
  const std::string dir = FolderWith("params_huge", EncodeSafetensors(AllTensors()));
  std::string json = SmallConfig().ToJson();
  json.insert(json.size() - 1, std::string(2 << 20, ' '));  // still valid JSON, 2 MiB
  WriteFile(dir + "/params.json", json);
  ExpectError(dir, absl::StatusCode::kInvalidArgument, "limit");
}

TEST(HostileModelFileTest, AbsurdSizesAreRefusedBeforeAnythingIsAllocated) {
  auto with = [](const char* key, int64_t value) {
    nlohmann::json j = nlohmann::json::parse(SmallConfig().ToJson());
    j[key] = value;
    if (std::string(key) == "sliding_window") j["max_seq_len"] = -1;
    return ModelConfig::FromJson(j.dump());
  };
  for (auto [key, value] :
       std::vector<std::pair<const char*, int64_t>>{{"n_layers", 100000000},
                                                    {"n_layers", 2147483647},
                                                    {"sliding_window", 100000000},
                                                    {"vocab_size", 1 << 30},
                                                    {"max_seq_len", int64_t{1} << 30}}) {
    auto c = with(key, value);
    ASSERT_FALSE(c.ok()) << key << " " << value;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status();
  }
  // A window that fits the bounds but not the memory of one sequence.
  nlohmann::json j = nlohmann::json::parse(SmallConfig().ToJson());
  j["dim"] = 65536;
  j["n_self_heads"] = 1;
  auto c = ModelConfig::FromJson(j.dump());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("state"), std::string::npos) << c.status();
}

TEST(HostileModelFileTest, DuplicateKeysAreRefused) {
  std::string json = SmallConfig().ToJson();
  json.insert(1, "\"dim\": 8, ");
  auto c = ModelConfig::FromJson(json);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("duplicate key 'dim'"), std::string::npos) << c.status();

  // The same tensor twice in a safetensors header: which one wins would be the parser's whim.
  const std::string file = EncodeSafetensors(AllTensors());
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(file[i]);
  const nlohmann::json header = nlohmann::json::parse(file.substr(8, len));
  const std::string entry = "\"layer_norm.weight\":" + header["layer_norm.weight"].dump();
  const std::string text = "{" + entry + "," + header.dump().substr(1);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  ExpectError(FolderWith("duplicate_tensor", out + text + file.substr(8 + len)),
              absl::StatusCode::kInvalidArgument, "duplicate key 'layer_norm.weight'");
}

TEST(HostileModelFileTest, DeeplyNestedHeaderIsRefusedWithoutBuildingIt) {
  const std::string file = EncodeSafetensors(AllTensors());
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(file[i]);
  const std::string nest = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  const std::string text = "{\"__metadata__\":" + nest + "," + file.substr(9, len - 1);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  ExpectError(FolderWith("nested", out + text + file.substr(8 + len)),
              absl::StatusCode::kInvalidArgument, "nested deeper");
}

TEST(HostileModelFileTest, OverlappingTensorsAreRefused) {
  // Two tensors of the same shape pointing at the same bytes.
  const auto bytes = EditHeader([](nlohmann::json& h) {
    h["self_decoder.layers.0.final_layer_norm.weight"]["data_offsets"] =
        h["self_decoder.layers.0.mixer_layer_norm.weight"]["data_offsets"];
  });
  ExpectError(FolderWith("overlap", bytes), absl::StatusCode::kInvalidArgument, "overlap");
}

TEST(HostileModelFileTest, NonFiniteWeightsAreRefusedByName) {
  struct Case {
    const char* tensor;
    DType dtype;
    uint32_t bits;  // the poisoned element's bit pattern
  };
  for (const Case& c : {Case{"self_decoder.layers.0.mixer.q_proj.weight", DType::kF32, 0x7FC00000},
                        Case{"output_projection.weight", DType::kF32, 0x7F800000},
                        Case{"output_projection.weight", DType::kBF16, 0xFF80},
                        Case{"embed_tokens.weight", DType::kF16, 0x7E00}}) {
    std::vector<TensorToWrite> tensors = AllTensors();
    for (TensorToWrite& t : tensors) {
      if (t.name != c.tensor) continue;
      const size_t width = c.dtype == DType::kF32 ? 4 : 2;
      t.dtype = c.dtype;
      t.bytes.resize(t.bytes.size() / 4 * width);
      std::memcpy(t.bytes.data() + 7 * width, &c.bits, width);  // element 7
    }
    const std::string dir = FolderWith("nonfinite", EncodeSafetensors(tensors));
    auto model = Model::Load(dir);
    ASSERT_FALSE(model.ok()) << c.tensor;
    EXPECT_NE(model.status().message().find(c.tensor), std::string::npos) << model.status();
    EXPECT_NE(model.status().message().find("element 7"), std::string::npos) << model.status();
  }
}

// Finite weights can still overflow: the step that produces non-finite logits fails its
// sequence with DATA_LOSS instead of sampling from NaN.
TEST(HostileModelFileTest, NonFiniteLogitsFailTheSequenceClearly) {
  std::vector<TensorToWrite> tensors = AllTensors();
  for (TensorToWrite& t : tensors) {
    float value = 0.0f;
    if (t.shape.size() == 1) value = 1.0f;                    // norms
    if (t.name == "embed_tokens.weight") value = 1.0f;        // a constant hidden state
    if (t.name == "output_projection.weight") value = 3e38f;  // D * 3e38 overflows
    if (value == 0.0f) continue;
    for (size_t i = 0; i < t.bytes.size(); i += 4) std::memcpy(&t.bytes[i], &value, 4);
  }
  const std::string dir = FolderWith("overflow", EncodeSafetensors(tensors));
  auto model = Model::Load(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  CpuBackend backend(*model);
  int32_t first = -1;
  auto gen = Generation::Prefill(backend, {0, 5, 9}, {}, &first);
  ASSERT_FALSE(gen.ok());
  EXPECT_EQ(gen.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(gen.status().message().find("non-finite logits"), std::string::npos);

  auto started = Generation::Start(backend, {0, 5, 9}, {});  // decodes from the last token
  ASSERT_TRUE(started.ok());
  Generation* g = &*started;
  std::vector<int32_t> tokens;
  ASSERT_TRUE(Generation::NextBatch(backend, {&g, 1}, &tokens).ok());
  EXPECT_EQ(tokens, std::vector<int32_t>{kNonFiniteLogits});
}

}  // namespace
}  // namespace yoco
