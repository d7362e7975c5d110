// The allow-list's parsing and check.
#include "lib/auth/caller_allow_list.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/auth/peer_identities.h"

namespace yoco {
namespace {

constexpr size_t kMaxIdentities = 100;
constexpr size_t kMaxIdentityBytes = 1024;

bool ValidIdentity(absl::string_view id) {
  if (id.empty() || id.size() > kMaxIdentityBytes) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<CallerAllowList> CallerAllowList::Parse(absl::string_view list) {
  CallerAllowList allowed;
  if (list.empty()) return absl::InvalidArgumentError("the list of allowed callers is empty");
  for (absl::string_view id : absl::StrSplit(list, ',')) {
    if (!ValidIdentity(id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "allowed caller \"", absl::CHexEscape(id), "\": an identity is 1 to ", kMaxIdentityBytes,
          " printable ASCII characters without spaces, identities separated by commas"));
    }
    allowed.identities_.emplace(id);
  }
  if (allowed.identities_.size() > kMaxIdentities) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than ", kMaxIdentities, " allowed callers"));
  }
  return allowed;
}

bool CallerAllowList::Admits(const std::vector<std::string>& identities) const {
  if (admits_everyone()) return true;
  for (const std::string& id : identities) {
    if (identities_.count(id) != 0) return true;
  }
  return false;
}

grpc::Status CallerAllowList::Check(const grpc::ServerContextBase& context,
                                    absl::string_view method) const {
  if (admits_everyone()) return grpc::Status::OK;
  const std::vector<std::string> identities = PeerIdentities(context);
  if (identities.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(method, " needs a client certificate"));
  }
  if (Admits(identities)) return grpc::Status::OK;
  // The names are the caller's own certificate's: telling them back leaks nothing, and says
  // which name an operator would have to add.
  std::vector<std::string> shown;
  for (const std::string& id : identities) shown.push_back(absl::CHexEscape(id.substr(0, 256)));
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(method, " is for the router only: the client certificate (",
                                   absl::StrJoin(shown, ", "),
                                   ") names no identity in the worker's --allowed-callers"));
}

}  // namespace yoco
