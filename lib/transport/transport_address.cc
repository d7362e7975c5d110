// Sealing and opening transport addresses.
#include "lib/transport/transport_address.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/checksum/message_tag.h"

namespace yoco {
namespace {

constexpr char kMagic[4] = {'Y', 'U', 'C', 'X'};
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 4;  // magic, pid, host, UCX address length

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
  out += MessageTag(key, out);
  return out;
}

absl::StatusOr<TransportAddress> OpenTransportAddress(absl::string_view sealed,
                                                      absl::string_view key) {
  if (sealed.size() < kHeaderBytes + kMessageTagBytes ||
      std::memcmp(sealed.data(), kMagic, sizeof kMagic) != 0) {
    return absl::InvalidArgumentError("not a transport address");
  }
  const uint32_t ucx_bytes = Read<uint32_t>(sealed.data() + 16);
  if (ucx_bytes == 0 || ucx_bytes > kMaxUcxAddressBytes ||
      sealed.size() != kHeaderBytes + ucx_bytes + kMessageTagBytes) {
    return absl::InvalidArgumentError(absl::StrCat("transport address of ", sealed.size(),
                                                   " bytes does not match its length "
                                                   "field (",
                                                   ucx_bytes, " bytes of UCX address)"));
  }
  const absl::string_view body = sealed.substr(0, kHeaderBytes + ucx_bytes);
  if (!MessageTagMatches(key, body, sealed.substr(body.size()))) {
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

}  // namespace yoco
