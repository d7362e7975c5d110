// Reads gRPC's auth context of the call.
#include "lib/auth/peer_identities.h"

namespace yoco {

std::vector<std::string> PeerIdentities(const grpc::ServerContextBase& context) {
  std::vector<std::string> identities;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return identities;
  for (const grpc::string_ref& id : auth->GetPeerIdentity()) {
    identities.emplace_back(id.data(), id.size());
  }
  for (const grpc::string_ref& cn : auth->FindPropertyValues("x509_common_name")) {
    identities.emplace_back(cn.data(), cn.size());
  }
  return identities;
}

}  // namespace yoco
