// CallerTenant: the tenant a gRPC call comes from under --tenants: the bearer token of its
// "authorization" metadata when it sends one, else the identities of its client certificate
// (which gRPC's TLS has verified against --tls-ca): its subject alternative names and its common
// name.
#ifndef YOCO_LIB_AUTH_CALLER_TENANT_H_
#define YOCO_LIB_AUTH_CALLER_TENANT_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"
#include "lib/auth/tenant_directory.h"

namespace yoco {

// UNAUTHENTICATED when the call sends a malformed or unknown token, or no token and no
// certificate the directory names.
absl::StatusOr<std::string> CallerTenant(TenantDirectory& tenants,
                                         const grpc::ServerContextBase& context);

// The token of an "authorization" value "Bearer TOKEN" (scheme case-insensitive, as HTTP's);
// INVALID_ARGUMENT for anything else.
absl::StatusOr<std::string> BearerToken(absl::string_view authorization);

}  // namespace yoco

#endif  // YOCO_LIB_AUTH_CALLER_TENANT_H_
