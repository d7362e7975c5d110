// Flag definitions (absl flags must be defined in exactly one place).
#include "lib/rpc/tls_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain this service presents (with --tls-key: serve TLS; the router also "
          "presents it to workers)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle: clients must present a certificate it signed (mutual TLS), and the "
          "router accepts only workers whose certificate it signed");
ABSL_FLAG(int, tls_reload_seconds, 60,
          "how often the certificate files are re-read (rotation without a restart)");

namespace yoco {

TlsFiles TlsFilesFromFlags() {
  TlsFiles files;
  files.cert = absl::GetFlag(FLAGS_tls_cert);
  files.key = absl::GetFlag(FLAGS_tls_key);
  files.ca = absl::GetFlag(FLAGS_tls_ca);
  files.reload = absl::Seconds(absl::GetFlag(FLAGS_tls_reload_seconds));
  return files;
}

}  // namespace yoco
