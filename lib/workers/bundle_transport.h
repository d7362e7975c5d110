// Transport settings for shipping state bundles between prefill and decode workers.
#ifndef YOCO_LIB_WORKERS_BUNDLE_TRANSPORT_H_
#define YOCO_LIB_WORKERS_BUNDLE_TRANSPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/files/key_file.h"
#include "lib/transport/ucx_transport.h"

namespace yoco {

// How long a transfer between workers (a bundle to its decode worker, a snapshot copy) may take
// when the caller names no limit: a gigabyte over a slow link fits, and a bundle that never
// comes stops holding its Decode call. The router's --transfer-timeout-ms has the same default.
inline constexpr absl::Duration kDefaultTransferWait = absl::Seconds(30);

// `tls` and `net_devices` as UcxTransportOptions takes them. The transport's own checksum is
// off: a bundle carries a CRC-32C that the decode worker verifies anyway (ParseStateBundle),
// and a second pass over every bundle on each side would cost bandwidth for nothing.
inline UcxTransportOptions BundleTransportOptions(const std::string& tls,
                                                  const std::string& net_devices) {
  UcxTransportOptions options;
  options.tls = tls;
  options.net_devices = net_devices;
  options.checksum = false;
  return options;
}

// As above, with the cluster's transport key read from `key_file` (empty: no key; addresses are
// then only checked for integrity, which a forger can get past).
inline absl::StatusOr<UcxTransportOptions> BundleTransportOptions(const std::string& tls,
                                                                  const std::string& net_devices,
                                                                  const std::string& key_file) {
  UcxTransportOptions options = BundleTransportOptions(tls, net_devices);
  if (!key_file.empty()) {
    absl::StatusOr<std::string> key = ReadKeyFile(key_file, "transport key");
    if (!key.ok()) return key.status();
    options.address_key = std::move(*key);
  }
  return options;
}

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_BUNDLE_TRANSPORT_H_
