// The workers' --allowed-callers flag: the identities whose certificates may call the worker's
// internal API (CallerAllowList).
#ifndef YOCO_LIB_AUTH_ALLOWED_CALLERS_FLAG_H_
#define YOCO_LIB_AUTH_ALLOWED_CALLERS_FLAG_H_

#include "absl/status/statusor.h"
#include "lib/auth/caller_allow_list.h"

namespace yoco {

// Under mutual TLS (`mutual_tls`: the worker has --tls-ca) the flag is required, so that no
// deployment leaves its workers open to every certificate of the CA by omission; without it
// the flag is refused, since there is no verified identity to match. INVALID_ARGUMENT, saying
// which, otherwise as CallerAllowList::Parse.
absl::StatusOr<CallerAllowList> AllowedCallersFromFlags(bool mutual_tls);

}  // namespace yoco

#endif  // YOCO_LIB_AUTH_ALLOWED_CALLERS_FLAG_H_
