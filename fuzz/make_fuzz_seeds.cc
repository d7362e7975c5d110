// Writes one valid input per fuzz target into fuzz/corpus/<target>/ (argv[1]): the shapes the
// mutations start from. Run it again when a format changes, and commit its output.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_config.h"
#include "lib/cache/snapshot_file.h"
#include "lib/engine/bundle_part.h"
#include "lib/engine/safetensors_writer.h"
#include "lib/engine/state_bundle.h"
#include "lib/transport/transport_address.h"
#include "yoco/v1/yoco.pb.h"

namespace {

void Write(const std::string& dir, const std::string& target, const std::string& name,
           const std::string& bytes) {
  const std::string folder = dir + "/" + target;
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/" + name, std::ios::binary) << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  using yoco::fuzz::Config;
  Write(dir, "params_json_fuzz", "config.json", Config().ToJson());

  yoco::SequenceState state = yoco::SequenceState::Create(Config());
  state.position = 128;
  const std::vector<float> k(128 * Config().kv_dim(), 0.5f), v(128 * Config().kv_dim(), -0.25f);
  state.shared_k.Append(k.data(), 128);
  state.shared_v.Append(v.data(), 128);
  yoco::StateBundle bundle{yoco::fuzz::kFingerprint, state, 7, {}};
  bundle.sampling.stop_token_ids = {2, 5};
  Write(dir, "state_bundle_fuzz", "bundle", yoco::SerializeStateBundle(bundle));
  // Nothing prefilled: empty K/V sections (once undefined behaviour under UBSan).
  yoco::StateBundle empty{yoco::fuzz::kFingerprint, yoco::SequenceState::Create(Config()), 0, {}};
  Write(dir, "state_bundle_fuzz", "position_zero", yoco::SerializeStateBundle(empty));
  // Version 3: two chunks, the first sent ahead as a part (the part itself is a seed too).
  yoco::SequenceState two = state;
  two.position = 256;
  two.shared_k.Append(k.data(), 128);
  two.shared_v.Append(v.data(), 128);
  yoco::StateBundle parted{yoco::fuzz::kFingerprint, two, 7, {}};
  parted.parts_id = 3;
  parted.parts = 1;
  parted.part_rows = 128;
  Write(dir, "state_bundle_fuzz", "parted", yoco::SerializeStateBundle(parted));
  std::string part(yoco::BundlePartBytes(Config(), 128), '\0');
  yoco::SerializeBundlePartTo(Config(), yoco::fuzz::kFingerprint, 3, 0, two, 0, 128,
                              reinterpret_cast<uint8_t*>(part.data()));
  Write(dir, "state_bundle_fuzz", "part", part);

  yoco::SnapshotFile file;
  file.chain.resize(1);
  file.chain[0].bytes.fill(0x5a);
  file.tokens.assign(128, 3);
  file.state = state;
  file.pinned = true;
  const std::string snapshot =
      yoco::SerializeSnapshotFile(file, yoco::fuzz::kFingerprint, yoco::fuzz::kCacheKey);
  Write(dir, "snapshot_file_fuzz", "snapshot", snapshot);
  Write(dir, "disk_tier_scan_fuzz", "snapshot", snapshot);

  // The same state with bf16 K/V rows.
  yoco::SequenceState bf16_state = yoco::SequenceState::Create(yoco::fuzz::Bf16KvConfig());
  bf16_state.position = 128;
  bf16_state.shared_k.Append(k.data(), 128);
  bf16_state.shared_v.Append(v.data(), 128);
  yoco::StateBundle bf16_bundle{yoco::fuzz::kFingerprint, bf16_state, 7, {}};
  Write(dir, "state_bundle_fuzz", "bundle_bf16_kv", yoco::SerializeStateBundle(bf16_bundle));
  file.state = bf16_state;
  Write(dir, "snapshot_file_fuzz", "snapshot_bf16_kv",
        yoco::SerializeSnapshotFile(file, yoco::fuzz::kFingerprint, yoco::fuzz::kCacheKey));

  std::vector<yoco::TensorToWrite> tensors = {
      {"a.weight", yoco::DType::kF32, {2, 3}, std::string(24, '\1')},
      {"b.weight", yoco::DType::kBF16, {4}, std::string(8, '\2')},
      {"c.weight", yoco::DType::kF16, {1, 2}, std::string(4, '\3')}};
  Write(dir, "safetensors_fuzz", "three_tensors", yoco::EncodeSafetensors(tensors));

  const std::string address = yoco::SealTransportAddress({1234, 42, std::string(40, '\x11')}, "");
  Write(dir, "transport_address_fuzz", "sealed", std::string(1, '\0') + address);
  Write(dir, "transport_address_fuzz", "reseal", std::string(1, '\1') + address.substr(4));

  Write(dir, "text_fuzz", "utf8", "\x05plain ascii, caf\xC3\xA9, \xE2\x82\xAC 5, \xF0\x9F\x99\x82");
  Write(dir, "text_fuzz", "broken", "\x03\xFF\xC3 cut \xE2\x82");

  Write(dir, "tiktoken_fuzz", "text",
        "The theme: caf\xC3\xA9 for 12\xE2\x82\xAC,\n\n  indented <|endoftext|> and "
        "<|fim_prefix|>x<|fim_suffix|> don't stop \xF0\x9F\x99\x82 123456");
  Write(dir, "tiktoken_fuzz", "broken", "ok \xFF then \xE2\x82");

  yoco::v1::GenerateRequest by_text;
  by_text.set_text("What is in the document?");
  by_text.mutable_sampling()->set_max_new_tokens(20);
  by_text.mutable_sampling()->set_temperature(0.8f);
  by_text.mutable_sampling()->set_top_k(40);
  by_text.mutable_sampling()->set_top_p(0.9f);
  by_text.mutable_sampling()->add_stop_strings("\n\n");
  by_text.mutable_sampling()->set_stop_at_eos(true);
  by_text.mutable_sampling()->set_logprobs(5);
  (*by_text.mutable_sampling()->mutable_logit_bias())[40] = -2.5f;
  by_text.mutable_sampling()->set_repetition_penalty(1.2f);
  by_text.mutable_sampling()->set_presence_penalty(0.5f);
  by_text.mutable_sampling()->set_min_tokens(3);
  by_text.mutable_sampling()->set_min_p(0.05f);
  by_text.mutable_sampling()->set_n(3);
  by_text.set_cache_salt("tenant");
  Write(dir, "public_request_fuzz", "generate_text", by_text.SerializeAsString());
  yoco::v1::GenerateRequest by_ids;
  for (int id : {0, 17, 5, 99, 254, 31}) by_ids.mutable_tokens()->add_ids(id);
  by_ids.mutable_sampling()->set_max_new_tokens(8);
  Write(dir, "public_request_fuzz", "generate_ids", by_ids.SerializeAsString());
  yoco::v1::PrecacheRequest precache;
  precache.set_text(std::string(300, 'd'));
  precache.set_pin(true);
  precache.set_ttl_seconds(600);
  Write(dir, "public_request_fuzz", "precache", precache.SerializeAsString());
  return 0;
}
