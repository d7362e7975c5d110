// PostHttp: one HTTP/1.1 POST over plain TCP with a deadline, for the OTLP exporter. Traces go to
// a collector on the node or in the pod (an OpenTelemetry Collector agent or sidecar), which
// forwards them with TLS and retries; so this client is small: no TLS, no redirects, no
// keep-alive, a response read only as far as its status line.
#ifndef YOCO_LIB_TRACE_HTTP_POST_H_
#define YOCO_LIB_TRACE_HTTP_POST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace yoco {

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string path = "/";
};

// "http://HOST[:PORT][/PATH]"; INVALID_ARGUMENT saying what is wrong (https:// included).
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url);

// The response's status code; UNAVAILABLE when the server cannot be reached or answers no HTTP,
// DEADLINE_EXCEEDED after `timeout`.
absl::StatusOr<int> PostHttp(const HttpUrl& url, absl::string_view content_type,
                             absl::string_view body, absl::Duration timeout);

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_HTTP_POST_H_
