// Sealing and opening transport addresses; reading the key file.
#include "lib/transport/transport_address.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"

namespace yoco {
namespace {

constexpr char kMagic[4] = {'Y', 'U', 'C', 'X'};
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 4;  // magic, pid, host, UCX address length
constexpr size_t kTagBytes = 32;
constexpr size_t kMinKeyBytes = 16, kMaxKeyBytes = 4096;

std::string Tag(absl::string_view key, absl::string_view data) {
  unsigned char tag[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // An empty key is a valid HMAC key: the tag then only checks integrity.
  static const char kEmpty = 0;
  HMAC(EVP_sha256(), key.empty() ? &kEmpty : key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), tag, &length);
  return std::string(reinterpret_cast<const char*>(tag), length);
}

template <typename T>
void Append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T Read(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

}  // namespace

std::string SealTransportAddress(const TransportAddress& address, absl::string_view key) {
  std::string out(kMagic, sizeof kMagic);
  Append(out, address.pid);
  Append(out, address.host);
  Append(out, static_cast<uint32_t>(address.ucx.size()));
  out += address.ucx;
  out += Tag(key, out);
  return out;
}

absl::StatusOr<TransportAddress> OpenTransportAddress(absl::string_view sealed,
                                                      absl::string_view key) {
  if (sealed.size() < kHeaderBytes + kTagBytes ||
      std::memcmp(sealed.data(), kMagic, sizeof kMagic) != 0) {
    return absl::InvalidArgumentError("not a transport address");
  }
  const uint32_t ucx_bytes = Read<uint32_t>(sealed.data() + 16);
  if (ucx_bytes == 0 || ucx_bytes > kMaxUcxAddressBytes ||
      sealed.size() != kHeaderBytes + ucx_bytes + kTagBytes) {
    return absl::InvalidArgumentError(absl::StrCat("transport address of ", sealed.size(),
                                                   " bytes does not match its length "
                                                   "field (",
                                                   ucx_bytes, " bytes of UCX address)"));
  }
  const absl::string_view body = sealed.substr(0, kHeaderBytes + ucx_bytes);
  const std::string tag = Tag(key, body);
  if (CRYPTO_memcmp(tag.data(), sealed.data() + body.size(), kTagBytes) != 0) {
    return absl::InvalidArgumentError(
        key.empty() ? "transport address is corrupt (its tag does not match)"
                    : "transport address is not authenticated by this cluster's transport key");
  }
  TransportAddress out;
  out.pid = Read<uint32_t>(sealed.data() + 4);
  out.host = Read<uint64_t>(sealed.data() + 8);
  out.ucx.assign(sealed.data() + kHeaderBytes, ucx_bytes);
  return out;
}

absl::StatusOr<std::string> LoadTransportKey(const std::string& path) {
  // Regular files only (a FIFO would block, /dev/zero never end), bounded; two bytes of slack
  // for a trailing newline.
  absl::StatusOr<std::string> key = ReadBoundedFile(path, kMaxKeyBytes + 2);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport key ", path, ": ", key.status().message()));
  }
  while (!key->empty() && (key->back() == '\n' || key->back() == '\r')) key->pop_back();
  if (key->size() < kMinKeyBytes || key->size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("transport key ", path, ": needs ", kMinKeyBytes,
                                                   " to ", kMaxKeyBytes, " bytes, has ",
                                                   key->size()));
  }
  return key;
}

}  // namespace yoco
