// Reads the call's metadata and TLS peer; the directory decides.
#include "lib/auth/caller_tenant.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace yoco {

absl::StatusOr<std::string> BearerToken(absl::string_view authorization) {
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::StartsWithIgnoreCase(authorization, kScheme)) {
    return absl::InvalidArgumentError("authorization must be \"Bearer TOKEN\"");
  }
  absl::string_view token = authorization.substr(kScheme.size());
  token = absl::StripLeadingAsciiWhitespace(token);
  if (token.empty()) return absl::InvalidArgumentError("authorization must be \"Bearer TOKEN\"");
  return std::string(token);
}

absl::StatusOr<std::string> CallerTenant(TenantDirectory& tenants,
                                         const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto [begin, end] = metadata.equal_range("authorization");
  if (begin != end) {
    if (std::next(begin) != end) {
      return absl::UnauthenticatedError("more than one authorization value");
    }
    absl::StatusOr<std::string> token =
        BearerToken(absl::string_view(begin->second.data(), begin->second.size()));
    if (!token.ok()) return absl::UnauthenticatedError(token.status().message());
    return tenants.ByToken(*token);
  }
  std::vector<std::string> identities;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    // The names gRPC verified (subject alternative names, else the common name), then the
    // common name, so a tenant file may name either.
    for (const grpc::string_ref& id : auth->GetPeerIdentity()) {
      identities.emplace_back(id.data(), id.size());
    }
    for (const grpc::string_ref& cn : auth->FindPropertyValues("x509_common_name")) {
      identities.emplace_back(cn.data(), cn.size());
    }
  }
  return tenants.ByIdentity(identities);
}

}  // namespace yoco
