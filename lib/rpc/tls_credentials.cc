// TLS credentials over gRPC's file-watching certificate provider.
#include "lib/rpc/tls_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"

namespace yoco {
namespace {

constexpr uint64_t kMaxPemBytes = 1 << 20;

// The file is a readable regular file with a PEM block in it.
absl::Status CheckPem(const std::string& path, const char* what) {
  absl::StatusOr<std::string> text = ReadBoundedFile(path, kMaxPemBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": ", text.status().message()));
  }
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " holds no PEM block"));
  }
  return absl::OkStatus();
}

absl::Status CheckFiles(const TlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!files.cert.empty()) {
    if (absl::Status st = CheckPem(files.cert, "--tls-cert"); !st.ok()) return st;
    if (absl::Status st = CheckPem(files.key, "--tls-key"); !st.ok()) return st;
  }
  if (!files.ca.empty()) {
    if (absl::Status st = CheckPem(files.ca, "--tls-ca"); !st.ok()) return st;
  }
  return absl::OkStatus();
}

unsigned int ReloadSeconds(const TlsFiles& files) {
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(files.reload)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  if (absl::Status st = CheckFiles(files); !st.ok()) return st;
  if (files.cert.empty()) {
    return absl::InvalidArgumentError("a TLS server needs --tls-cert and --tls-key");
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, ReloadSeconds(files));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!files.ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  if (absl::Status st = CheckFiles(files); !st.ok()) return st;
  if (files.ca.empty()) {
    return absl::InvalidArgumentError("a TLS client needs --tls-ca to verify the server");
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, ReloadSeconds(files));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!files.cert.empty()) options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace yoco
