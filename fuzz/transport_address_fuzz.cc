// Transport addresses from the network: any bytes are refused before UCX sees them unless their
// tag checks out. The first byte picks a mode: raw bytes, or bytes re-tagged with the (empty)
// key so the layout checks behind the tag are reached.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/transport/transport_address.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    // Re-seal whatever the bytes claim: pid, host and UCX address from the input.
    yoco::TransportAddress claimed;
    if (bytes.size() >= 12) {
      claimed.pid = static_cast<uint32_t>(bytes[0]);
      claimed.host = static_cast<uint64_t>(bytes[1]);
      claimed.ucx = bytes.substr(12);
    }
    bytes = yoco::SealTransportAddress(claimed, "");
  }
  auto opened = yoco::OpenTransportAddress(bytes, "");
  if (opened.ok() && (opened->ucx.empty() || opened->ucx.size() > yoco::kMaxUcxAddressBytes)) {
    __builtin_trap();
  }
  if (opened.ok() && yoco::SealTransportAddress(*opened, "") != bytes) __builtin_trap();
  return 0;
}
