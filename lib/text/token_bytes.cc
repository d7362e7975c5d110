// TokenBytes: one Decode per id; VocabularyFingerprint: FNV-1a, the same on every machine.
#include "lib/text/tokenizer.h"

namespace yoco {

std::vector<std::string> TokenBytes(const Tokenizer& tokenizer, int32_t vocab_size) {
  std::vector<std::string> bytes(vocab_size);
  for (int32_t id = kTokenizerIdOffset; id < vocab_size && id < tokenizer.id_limit(); ++id) {
    absl::StatusOr<std::string> b = tokenizer.Decode({&id, 1});
    if (b.ok()) bytes[id] = *std::move(b);
  }
  return bytes;
}

uint64_t VocabularyFingerprint(const std::vector<std::string>& token_bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&hash](uint8_t byte) { hash = (hash ^ byte) * 0x100000001b3ull; };
  for (const std::string& bytes : token_bytes) {
    for (int shift = 0; shift < 64; shift += 8) mix(static_cast<uint8_t>(bytes.size() >> shift));
    for (char c : bytes) mix(static_cast<uint8_t>(c));
  }
  return hash == 0 ? 1 : hash;
}

}  // namespace yoco
