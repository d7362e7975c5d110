// The Kubernetes API's view of worker pods, for k8s:// discovery: the target syntax, and what
// discovery reads from a PodList and from watch events (the JSON the API server sends for
// GET /api/v1/namespaces/NS/pods, with and without ?watch=1). A pod is a worker while it is
// Ready and not being deleted.
#ifndef YOCO_LIB_ROUTING_KUBERNETES_PODS_H_
#define YOCO_LIB_ROUTING_KUBERNETES_PODS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

// "k8s://NAMESPACE/LABEL_SELECTOR?port=N[&tls_name=NAME]", e.g.
// "k8s://yoco/app.kubernetes.io/component=prefill?port=50061&tls_name=yoco-prefill".
// `tls_name`: the name the pods' certificates carry (a pod IP is in none), under TLS.
struct KubernetesWorkerTarget {
  std::string ns;
  std::string label_selector;
  uint16_t port = 0;
  std::string tls_name;

  static bool Matches(const std::string& spec) { return spec.rfind("k8s:", 0) == 0; }
  // INVALID_ARGUMENT naming what is wrong.
  static absl::StatusOr<KubernetesWorkerTarget> Parse(const std::string& spec);
  // The API path of the pods (no query).
  std::string PodsPath() const;
  // The list (watch = false) or watch query, label selector percent-encoded.
  std::string Query(bool watch, const std::string& resource_version, int timeout_seconds) const;
};

struct PodView {
  std::string name;
  std::string ip;  // status.podIP; empty before it is scheduled
  bool ready = false;
  bool deleting = false;  // metadata.deletionTimestamp is set
  bool worker() const { return ready && !deleting && !ip.empty(); }
};

struct PodList {
  std::string resource_version;  // the list's: a watch starts from it
  std::vector<PodView> pods;
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  PodView pod;                   // kAdded, kModified, kDeleted
  std::string resource_version;  // the object's (a bookmark carries only this)
  int error_code = 0;            // kError: the Status object's code (410: re-list)
  std::string error_message;
};

// INVALID_ARGUMENT when the text is not a PodList / watch event.
absl::StatusOr<PodList> ParsePodList(absl::string_view json);
absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view json);

// The message of a Status object in an error response's body ("pods is forbidden: User ...
// cannot list resource ..."), or the body's start when it is not one.
std::string ApiErrorMessage(absl::string_view body);

// The workers' "IP:PORT" addresses of ready pods, sorted.
std::vector<std::string> WorkerAddresses(const std::map<std::string, PodView>& pods, uint16_t port);

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_KUBERNETES_PODS_H_
