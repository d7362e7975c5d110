// gRPC credentials from PEM files: plaintext when none are given, TLS with a certificate and
// key, mutual TLS when a CA is given as well (a server then accepts only clients presenting a
// certificate that CA signed; a client accepts only servers whose certificate it signed). The
// files are re-read every `reload` so that rotated certificates (cert-manager) take effect
// without a restart. A set that cannot work (a certificate without its key, a missing or
// special file) is INVALID_ARGUMENT at start-up rather than a handshake failure later.
#ifndef YOCO_LIB_RPC_TLS_CREDENTIALS_H_
#define YOCO_LIB_RPC_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace yoco {

struct TlsFiles {
  std::string cert;  // this side's certificate chain
  std::string key;   // its private key
  std::string ca;    // the CA peers' certificates must chain to
  absl::Duration reload = absl::Seconds(60);

  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// Insecure without files; a server needs cert and key (ca: require client certificates).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// Insecure without files; a client needs the ca (cert and key: present them, for mTLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

}  // namespace yoco

#endif  // YOCO_LIB_RPC_TLS_CREDENTIALS_H_
