// TransportAddress: the envelope around a UCX worker address that workers hand to each other
// (through the router, over gRPC). UCX trusts a packed worker address completely: bytes that are
// not one make ucp_ep_create assert and abort the process. So a transport connects only to an
// address that carries a valid tag: HMAC-SHA256 under the cluster's transport key, over the
// envelope. With a key (--transport-key-file), only a holder of the key can make an address a
// worker will connect to; without one the tag is still checked, which catches corrupt or random
// bytes but not a forger who computes it.
#ifndef YOCO_LIB_TRANSPORT_TRANSPORT_ADDRESS_H_
#define YOCO_LIB_TRANSPORT_TRANSPORT_ADDRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

// What an envelope says besides the UCX address: the process and host it belongs to, so a
// transport can notice a dead peer on the same host where UCX cannot (shared memory).
struct TransportAddress {
  uint32_t pid = 0;
  uint64_t host = 0;
  std::string ucx;  // the packed UCX worker address
};

// Largest UCX address an envelope may carry (real ones are a few hundred bytes).
inline constexpr size_t kMaxUcxAddressBytes = 64 << 10;

// "YUCX", pid, host, length of the UCX address, the UCX address, then the 32-byte tag.
std::string SealTransportAddress(const TransportAddress& address, absl::string_view key);

// The envelope's contents when its layout and tag are right; INVALID_ARGUMENT (naming what is
// wrong) otherwise. The tag is compared in constant time.
absl::StatusOr<TransportAddress> OpenTransportAddress(absl::string_view sealed,
                                                      absl::string_view key);

}  // namespace yoco

#endif  // YOCO_LIB_TRANSPORT_TRANSPORT_ADDRESS_H_
