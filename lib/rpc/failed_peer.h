// Which worker a failed internal call blames. A prefill worker that prefilled a request but
// could not ship its state bundle to the decode worker the router named answers with this
// trailing metadata: the decode worker failed, not the prefill worker, and the router retries
// on the same prefill worker (whose prefix cache now holds the prompt) and another decode one.
#ifndef YOCO_LIB_RPC_FAILED_PEER_H_
#define YOCO_LIB_RPC_FAILED_PEER_H_

namespace yoco {

inline constexpr char kFailedPeerMetadata[] = "yoco-failed-peer";
inline constexpr char kFailedPeerDecode[] = "decode";

}  // namespace yoco

#endif  // YOCO_LIB_RPC_FAILED_PEER_H_
