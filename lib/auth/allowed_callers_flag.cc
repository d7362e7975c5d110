// Flag definition (absl flags must be defined in exactly one place).
#include "lib/auth/allowed_callers_flag.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, allowed_callers, "",
          "with mutual TLS (--tls-ca), required: the identities (a certificate's subject "
          "alternative name or common name, comma-separated) that may call this worker's API, "
          "i.e. the router's certificate; other certificates of the CA (a tenant's) are "
          "PERMISSION_DENIED. Health checks and reflection stay open to every certificate");

namespace yoco {

absl::StatusOr<CallerAllowList> AllowedCallersFromFlags(bool mutual_tls) {
  const std::string list = absl::GetFlag(FLAGS_allowed_callers);
  if (!mutual_tls) {
    if (list.empty()) return CallerAllowList();
    return absl::InvalidArgumentError(
        "--allowed-callers needs mutual TLS (--tls-cert, --tls-key and --tls-ca): without a "
        "verified client certificate there is no identity to match");
  }
  if (list.empty()) {
    return absl::InvalidArgumentError(
        "with --tls-ca a worker needs --allowed-callers: the identities of the router's "
        "certificate (every other certificate the CA signed, a tenant's too, is then refused)");
  }
  absl::StatusOr<CallerAllowList> allowed = CallerAllowList::Parse(list);
  if (!allowed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--allowed-callers: ", allowed.status().message()));
  }
  return allowed;
}

}  // namespace yoco
