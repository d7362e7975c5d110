// SHA-256 from OpenSSL's libcrypto (already a dependency of gRPC).
#include "lib/cache/block_key.h"

#include <openssl/sha.h>

#include <array>
#include <bit>
#include <cstring>

namespace yoco {
namespace {

void PutLe(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

BlockKey Digest(absl::string_view data) {
  unsigned char full[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), full);
  BlockKey key;
  std::memcpy(key.bytes.data(), full, key.bytes.size());
  return key;
}

}  // namespace

std::string BlockKey::Hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

absl::StatusOr<BlockKey> BlockKey::FromHex(absl::string_view hex) {
  BlockKey key;
  if (hex.size() != 2 * key.bytes.size()) {
    return absl::InvalidArgumentError("a cache handle has 32 hex digits");
  }
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < key.bytes.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("a cache handle has 32 hex digits");
    key.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return key;
}

BlockKey PrefixRootKey(uint64_t model_fingerprint, absl::string_view salt) {
  std::string data = "yoco-prefix-v1";
  PutLe(model_fingerprint, 8, &data);
  PutLe(salt.size(), 4, &data);
  data.append(salt.data(), salt.size());
  return Digest(data);
}

BlockKey NextBlockKey(const BlockKey& previous, absl::Span<const int32_t> block) {
  // A 1M-token prompt is 7813 blocks, hashed on the router and again on the prefill worker:
  // the bytes are copied in whole (on a little-endian host the tokens' memory is their
  // encoding), not appended a byte at a time, which took longer than the hashing itself.
  constexpr size_t kPrevious = sizeof(previous.bytes);
  if (std::endian::native != std::endian::little || block.size() > kCacheBlockTokens) {
    std::string data(reinterpret_cast<const char*>(previous.bytes.data()), kPrevious);
    for (int32_t token : block) PutLe(static_cast<uint32_t>(token), 4, &data);
    return Digest(data);
  }
  std::array<unsigned char, kPrevious + sizeof(int32_t) * kCacheBlockTokens> data;
  std::memcpy(data.data(), previous.bytes.data(), kPrevious);
  std::memcpy(data.data() + kPrevious, block.data(), sizeof(int32_t) * block.size());
  return Digest(absl::string_view(reinterpret_cast<const char*>(data.data()),
                                  kPrevious + sizeof(int32_t) * block.size()));
}

std::vector<BlockKey> PrefixBlockKeys(uint64_t model_fingerprint, absl::string_view salt,
                                      absl::Span<const int32_t> tokens) {
  BlockKey key = PrefixRootKey(model_fingerprint, salt);
  std::vector<BlockKey> keys;
  const size_t blocks = tokens.size() / kCacheBlockTokens;
  keys.reserve(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    key = NextBlockKey(key, tokens.subspan(b * kCacheBlockTokens, kCacheBlockTokens));
    keys.push_back(key);
  }
  return keys;
}

}  // namespace yoco
