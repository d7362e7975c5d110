// HMAC-SHA256 with OpenSSL's libcrypto.
#include "lib/checksum/message_tag.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace yoco {

std::string MessageTag(absl::string_view key, absl::string_view data) {
  unsigned char tag[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // HMAC takes an empty key, but not a null pointer for it.
  static const char kEmpty = 0;
  HMAC(EVP_sha256(), key.empty() ? &kEmpty : key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), tag, &length);
  return std::string(reinterpret_cast<const char*>(tag), length);
}

bool MessageTagMatches(absl::string_view key, absl::string_view data, absl::string_view tag) {
  if (tag.size() != kMessageTagBytes) return false;
  const std::string expected = MessageTag(key, data);
  return CRYPTO_memcmp(expected.data(), tag.data(), kMessageTagBytes) == 0;
}

}  // namespace yoco
