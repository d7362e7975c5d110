// How UcxTransport tells that a peer process is gone when UCX cannot: a process on the same host
// (and PID namespace) is probed by its pid; shared-memory transports report no peer failures in
// UCX 1.13, so a transport using one must rely on the probe alone.
#ifndef YOCO_LIB_TRANSPORT_PEER_LIVENESS_H_
#define YOCO_LIB_TRANSPORT_PEER_LIVENESS_H_

#include <cstdint>
#include <string>

namespace yoco {

// Identifies the space a process id means something in: this boot of this machine and this PID
// namespace. Processes compare equal only when each can look the other's pid up (kill(pid, 0)),
// so containers that share a host, or even a host name (hostNetwork pods), but not a PID
// namespace never probe each other's pids, which would name other processes or none.
uint64_t HostId();

// Whether process `pid` (of this HostId) has exited; false for pid 0 (unknown).
bool ProcessGone(uint32_t pid);

// Whether UCX 1.13 reports peer failures on the transports of `tls` (a UCX_TLS list): not when
// any of them is shared memory.
bool UcxDetectsPeerFailure(const std::string& tls);

}  // namespace yoco

#endif  // YOCO_LIB_TRANSPORT_PEER_LIVENESS_H_
