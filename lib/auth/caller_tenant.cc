// Reads the call's metadata and TLS peer; the directory decides.
#include "lib/auth/caller_tenant.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/auth/peer_identities.h"

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
  return tenants.ByIdentity(PeerIdentities(context));
}

}  // namespace yoco
