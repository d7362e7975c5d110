// CallerAllowList: who may call a worker's internal API (PrefillWorker, DecodeWorker). Under
// mutual TLS every certificate the CA signed passes the handshake, tenants' client certificates
// included where one CA serves both; the allow-list narrows a worker's callers to the router's
// identities (a subject alternative name or the common name of its certificate, as PeerIdentities
// reads them). Health checking and reflection are not behind it: the probes present the pod's
// own certificate, and neither says anything a caller could misuse.
#ifndef YOCO_LIB_AUTH_CALLER_ALLOW_LIST_H_
#define YOCO_LIB_AUTH_CALLER_ALLOW_LIST_H_

#include <grpcpp/grpcpp.h>

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

class CallerAllowList {
 public:
  // Admits every caller: a worker without mutual TLS, where the network is the only boundary.
  CallerAllowList() = default;

  // "id1,id2,...": identities of 1 to 1024 printable ASCII characters without spaces, at most
  // 100. INVALID_ARGUMENT for an empty list or entry, or any other character.
  static absl::StatusOr<CallerAllowList> Parse(absl::string_view list);

  bool admits_everyone() const { return identities_.empty(); }

  // Whether one of `identities` is on the list (always, when it admits everyone).
  bool Admits(const std::vector<std::string>& identities) const;

  // OK for an admitted caller of `method` (a name for the message, e.g.
  // "PrefillWorker.ListCache"); UNAUTHENTICATED for a call without a verified certificate,
  // PERMISSION_DENIED naming the certificate's identities otherwise.
  grpc::Status Check(const grpc::ServerContextBase& context, absl::string_view method) const;

 private:
  std::set<std::string> identities_;
};

}  // namespace yoco

#endif  // YOCO_LIB_AUTH_CALLER_ALLOW_LIST_H_
