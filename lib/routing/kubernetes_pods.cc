// JSON from the API server through ParseStrictJson: it is input from the network.
#include "lib/routing/kubernetes_pods.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/model/strict_json.h"

namespace yoco {
namespace {

using Json = nlohmann::json;

bool ValidNamespace(absl::string_view ns) {
  if (ns.empty() || ns.size() > 63 || ns.front() == '-' || ns.back() == '-') return false;
  return std::all_of(ns.begin(), ns.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// What a label selector may hold (keys with prefixes, =, ==, !=, in/notin sets, !key).
bool ValidSelectorChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("._-/=!,() ").find(c) != std::string_view::npos;
}

std::string PercentEncode(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

absl::StatusOr<Json> ParseApiJson(absl::string_view text) {
  JsonLimits limits;
  limits.max_depth = 64;  // pods nest deeply (spec.containers[].env[].valueFrom...)
  limits.max_values = size_t{1} << 24;
  return ParseStrictJson(text, limits);
}

std::string StringAt(const Json& j, std::initializer_list<const char*> path) {
  const Json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return "";
    auto it = at->find(key);
    if (it == at->end()) return "";
    at = &*it;
  }
  return at->is_string() ? at->get<std::string>() : "";
}

absl::StatusOr<PodView> ParsePod(const Json& pod) {
  if (!pod.is_object()) return absl::InvalidArgumentError("a pod is not an object");
  PodView view;
  view.name = StringAt(pod, {"metadata", "name"});
  if (view.name.empty()) return absl::InvalidArgumentError("a pod without metadata.name");
  view.ip = StringAt(pod, {"status", "podIP"});
  auto meta = pod.find("metadata");
  view.deleting = meta->contains("deletionTimestamp") && !(*meta)["deletionTimestamp"].is_null();
  auto status = pod.find("status");
  if (status != pod.end() && status->is_object()) {
    auto conditions = status->find("conditions");
    if (conditions != status->end() && conditions->is_array()) {
      for (const Json& c : *conditions) {
        if (StringAt(c, {"type"}) == "Ready") view.ready = StringAt(c, {"status"}) == "True";
      }
    }
  }
  return view;
}

}  // namespace

absl::StatusOr<KubernetesWorkerTarget> KubernetesWorkerTarget::Parse(const std::string& spec) {
  const std::string usage = "expected k8s://NAMESPACE/LABEL_SELECTOR?port=N[&tls_name=NAME]";
  if (spec.rfind("k8s://", 0) != 0) return absl::InvalidArgumentError(spec + ": " + usage);
  const std::string rest = spec.substr(6);
  const size_t slash = rest.find('/'), question = rest.rfind('?');
  if (slash == std::string::npos || question == std::string::npos || question < slash) {
    return absl::InvalidArgumentError(spec + ": " + usage);
  }
  KubernetesWorkerTarget target;
  target.ns = rest.substr(0, slash);
  target.label_selector = rest.substr(slash + 1, question - slash - 1);
  const std::string query = rest.substr(question + 1);
  if (!ValidNamespace(target.ns)) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec, ": '", target.ns, "' is not a namespace name"));
  }
  if (target.label_selector.empty() || target.label_selector.size() > 1024 ||
      !std::all_of(target.label_selector.begin(), target.label_selector.end(), ValidSelectorChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec,
                     ": the label selector must be 1 to 1024 characters of a-z A-Z 0-9 "
                     "._-/=!,() and spaces"));
  }
  uint32_t port = 0;
  for (absl::string_view param : absl::StrSplit(query, '&')) {
    if (absl::ConsumePrefix(&param, "port=")) {
      if (!absl::SimpleAtoi(param, &port) || port == 0 || port > 65535) port = 0;
    } else if (absl::ConsumePrefix(&param, "tls_name=") && !param.empty() &&
               std::all_of(param.begin(), param.end(),
                           [](char c) { return absl::ascii_isalnum(c) || c == '.' || c == '-'; })) {
      target.tls_name = std::string(param);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(spec, ": unknown or malformed parameter '", param, "'; ", usage));
    }
  }
  if (port == 0)
    return absl::InvalidArgumentError(absl::StrCat(spec, ": expected ?port=N (1-65535)"));
  target.port = static_cast<uint16_t>(port);
  return target;
}

std::string KubernetesWorkerTarget::PodsPath() const {
  return absl::StrCat("/api/v1/namespaces/", ns, "/pods");
}

std::string KubernetesWorkerTarget::Query(bool watch, const std::string& resource_version,
                                          int timeout_seconds) const {
  std::string q = absl::StrCat("labelSelector=", PercentEncode(label_selector));
  if (watch) {
    absl::StrAppend(&q, "&watch=1&allowWatchBookmarks=true&timeoutSeconds=", timeout_seconds,
                    "&resourceVersion=", PercentEncode(resource_version));
  }
  return q;
}

absl::StatusOr<PodList> ParsePodList(absl::string_view json) {
  absl::StatusOr<Json> j = ParseApiJson(json);
  if (!j.ok()) return j.status();
  if (!j->is_object() || StringAt(*j, {"kind"}) != "PodList" || !j->contains("items")) {
    return absl::InvalidArgumentError("not a PodList");
  }
  PodList list;
  list.resource_version = StringAt(*j, {"metadata", "resourceVersion"});
  const Json& items = (*j)["items"];
  if (!items.is_array() && !items.is_null()) {
    return absl::InvalidArgumentError("PodList.items is not an array");
  }
  if (items.is_array()) {
    for (const Json& pod : items) {
      absl::StatusOr<PodView> view = ParsePod(pod);
      if (!view.ok()) return view.status();
      list.pods.push_back(*std::move(view));
    }
  }
  return list;
}

absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view json) {
  absl::StatusOr<Json> j = ParseApiJson(json);
  if (!j.ok()) return j.status();
  const std::string type = j->is_object() ? StringAt(*j, {"type"}) : "";
  if (!j->is_object() || !j->contains("object") || !(*j)["object"].is_object()) {
    return absl::InvalidArgumentError("not a watch event");
  }
  const Json& object = (*j)["object"];
  WatchEvent event;
  event.resource_version = StringAt(object, {"metadata", "resourceVersion"});
  if (type == "ERROR") {
    event.type = WatchEvent::Type::kError;
    auto code = object.find("code");
    if (code != object.end() && code->is_number_integer()) event.error_code = code->get<int>();
    event.error_message = StringAt(object, {"message"});
    return event;
  }
  if (type == "BOOKMARK") {
    event.type = WatchEvent::Type::kBookmark;
    return event;
  }
  if (type == "ADDED") {
    event.type = WatchEvent::Type::kAdded;
  } else if (type == "MODIFIED") {
    event.type = WatchEvent::Type::kModified;
  } else if (type == "DELETED") {
    event.type = WatchEvent::Type::kDeleted;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown watch event type '", type, "'"));
  }
  absl::StatusOr<PodView> pod = ParsePod(object);
  if (!pod.ok()) return pod.status();
  event.pod = *std::move(pod);
  return event;
}

std::string ApiErrorMessage(absl::string_view body) {
  absl::StatusOr<Json> j = ParseApiJson(body);
  if (j.ok() && j->is_object() && StringAt(*j, {"kind"}) == "Status") {
    const std::string message = StringAt(*j, {"message"});
    if (!message.empty()) return message;
  }
  return std::string(body.substr(0, 200));
}

std::vector<std::string> WorkerAddresses(const std::map<std::string, PodView>& pods,
                                         uint16_t port) {
  std::set<std::string> addresses;
  for (const auto& [name, pod] : pods) {
    if (!pod.worker()) continue;
    const bool v6 = pod.ip.find(':') != std::string::npos;
    addresses.insert(absl::StrCat(v6 ? "[" : "", pod.ip, v6 ? "]" : "", ":", port));
  }
  return {addresses.begin(), addresses.end()};
}

}  // namespace yoco
