// HttpCompletionClient: load-test requests as streamed /v1/completions calls over HTTP/1.1, so a
// workload can be pointed at any OpenAI-compatible server (the router's own HTTP front, or
// another serving system for comparison) and measured the same way as over gRPC: each SSE
// chunk is an arrival (TTFT, gaps), the token counts come from the stream's usage.
#ifndef YOCO_LOADTEST_HTTP_COMPLETION_H_
#define YOCO_LOADTEST_HTTP_COMPLETION_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadtest/request_record.h"
#include "loadtest/workload.h"
#include "nlohmann/json.hpp"

namespace yoco {

struct HttpEndpoint {
  std::string host, port;  // from http://HOST:PORT
  std::string model;       // the request's "model"
  std::string bearer_token;
};

// INVALID_ARGUMENT unless `url` is http://HOST:PORT (an optional trailing "/" or "/v1").
absl::StatusOr<HttpEndpoint> ParseHttpEndpoint(const std::string& url);

struct CompletionParams {
  float temperature = 0;
  uint64_t seed = 0;
  std::string cache_salt;
};

// The request body for `plan`: token ids (or the replayed text) as the prompt, max_tokens,
// ignore_eos (every request makes exactly max_tokens, as over gRPC), streamed with usage.
std::string CompletionBody(const PlannedRequest& plan, const std::string& model,
                           const CompletionParams& params);

// What one SSE event says, added to `record`: a chunk with text is a token (its arrival `now_ms`
// after the request was sent); usage gives the token counts and cached prompt tokens; a choice's
// finish_reason the reason. Returns false for the stream's "[DONE]".
bool RecordCompletionEvent(const std::string& data, double now_ms, double* last_token_ms,
                           RequestRecord* record);

// The status name (as gRPC's) for an HTTP error status.
std::string StatusNameOfHttp(int http_status);

class HttpCompletionClient {
 public:
  // `threads` I/O threads serve every request; nothing blocks a thread while a stream waits.
  HttpCompletionClient(HttpEndpoint endpoint, int threads);
  ~HttpCompletionClient();  // waits for the requests in flight
  HttpCompletionClient(const HttpCompletionClient&) = delete;
  HttpCompletionClient& operator=(const HttpCompletionClient&) = delete;

  // POSTs `body` to /v1/completions (one connection per request) and calls `done` once, from an
  // I/O thread, with the timing fields, counts, finish reason and status of `record` filled in.
  void Start(std::string body, absl::Duration timeout, std::function<void(RequestRecord)> done,
             RequestRecord record);

  struct Io;

 private:
  HttpEndpoint endpoint_;
  std::unique_ptr<Io> io_;
};

}  // namespace yoco

#endif  // YOCO_LOADTEST_HTTP_COMPLETION_H_
