// PeerIdentities: the names a gRPC caller's client certificate carries, as gRPC's TLS verified
// them against --tls-ca: its subject alternative names (else its common name), then its common
// name, so a tenant file or an allow-list may name either.
#ifndef YOCO_LIB_AUTH_PEER_IDENTITIES_H_
#define YOCO_LIB_AUTH_PEER_IDENTITIES_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

namespace yoco {

// Empty when the call came without a verified certificate (plaintext, server-only TLS).
std::vector<std::string> PeerIdentities(const grpc::ServerContextBase& context);

}  // namespace yoco

#endif  // YOCO_LIB_AUTH_PEER_IDENTITIES_H_
