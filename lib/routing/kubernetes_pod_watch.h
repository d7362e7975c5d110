// KubernetesPodWatch: the worker pods of a k8s:// target, kept current from the Kubernetes API
// with the pod's service account: one LIST, then a WATCH from the list's resourceVersion, over
// HTTPS (Boost.Beast on Boost.Asio, OpenSSL), on a thread of its own.
//
// The API's rules, as a client must follow them: bookmarks move the resourceVersion on; "410
// Gone" (the version is too old: as a response or as an ERROR event) means list again; a
// dropped connection or a watch the server ends (timeoutSeconds) means watch again from the last
// version, after a backoff when it failed; 401/403 (the token or RBAC) is logged once with what
// to grant, and the last known set stays. The token is read again for every request, so a
// rotated (projected) token is used as soon as the kubelet writes it; so is the CA.
#ifndef YOCO_LIB_ROUTING_KUBERNETES_POD_WATCH_H_
#define YOCO_LIB_ROUTING_KUBERNETES_POD_WATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>  // ahead of Asio in the .cc: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/routing/kubernetes_pods.h"

namespace yoco {

struct KubernetesApi {
  std::string host;  // a name or an IP address, which the server's certificate must carry
  uint16_t port = 443;
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

  // "https://HOST:PORT" (or "" for the in-cluster address from KUBERNETES_SERVICE_HOST and
  // KUBERNETES_SERVICE_PORT, which the kubelet sets in every container). FAILED_PRECONDITION
  // outside a pod without a server; INVALID_ARGUMENT for a malformed one.
  static absl::StatusOr<KubernetesApi> FromServer(const std::string& server);
};

struct PodWatchOptions {
  absl::Duration request_timeout = absl::Seconds(10);  // connect + TLS + a whole list
  int watch_timeout_seconds = 240;                     // the server ends each watch after this
  // No byte (not even a bookmark) for this long: the connection is presumed dead.
  absl::Duration watch_idle_timeout = absl::Seconds(300);
  absl::Duration min_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(30);
  uint64_t max_event_bytes = uint64_t{16} << 20;  // one watch event / a list's body
};

class KubernetesPodWatch {
 public:
  KubernetesPodWatch(KubernetesApi api, KubernetesWorkerTarget target, PodWatchOptions options,
                     std::string what);
  ~KubernetesPodWatch();  // stops the thread; nothing runs after it returns
  KubernetesPodWatch(const KubernetesPodWatch&) = delete;
  KubernetesPodWatch& operator=(const KubernetesPodWatch&) = delete;

  // "IP:PORT" of every Ready pod without a deletion timestamp, sorted. UNAVAILABLE until the
  // first list succeeded (afterwards the last known set, whatever fails).
  absl::StatusOr<std::vector<std::string>> Addresses() const;

  struct Counters {
    uint64_t lists = 0;    // successful
    uint64_t watches = 0;  // started
    uint64_t gone = 0;     // 410s: re-lists
    uint64_t bookmarks = 0;
    uint64_t failures = 0;   // requests that failed (connection, TLS, HTTP status, JSON)
    uint64_t forbidden = 0;  // 401 / 403
  };
  Counters counters() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_KUBERNETES_POD_WATCH_H_
