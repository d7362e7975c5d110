// HttpServer: a small HTTP/1.1 server (Boost.Beast over Asio) for front ends that translate HTTP
// into the services' own calls. It enforces what a public listener needs — bounded headers and
// bodies, a deadline for a request to arrive (a slow-loris client is dropped), an idle limit
// between keep-alive requests, a cap on connections — and hands each request to a handler that
// answers asynchronously, whole or as a chunked stream, from any thread. A few I/O threads serve
// every connection: nothing holds a thread while a response waits for its data.
#ifndef YOCO_LIB_HTTP_HTTP_SERVER_H_
#define YOCO_LIB_HTTP_HTTP_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace yoco {

struct HttpRequest {
  std::string method;                                        // as sent: "GET", "POST", ...
  std::string target;                                        // path and query
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;

  // The first header of that (lower-case) name; "" when absent.
  std::string Header(absl::string_view name) const;
  std::string Path() const;                         // the target before '?'
  std::string Query(absl::string_view name) const;  // a query parameter, undecoded; "" if absent
};

// One request's answer. Any thread may call these; each call is ordered after the previous one.
// Once the client is gone they do nothing (a Send's callback then gets false).
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // A header the response carries besides the server's own (e.g. X-Request-Id); called before
  // Respond or StartStream. The value must be printable ASCII (no CR or LF).
  virtual void SetHeader(std::string name, std::string value) = 0;
  // The whole response, with Content-Length.
  virtual void Respond(int status, std::string content_type, std::string body) = 0;
  // A response whose body follows in pieces (chunked transfer encoding): StartStream, Send
  // each piece, End.
  virtual void StartStream(int status, std::string content_type) = 0;
  // `sent(ok)` runs on an I/O thread once the piece is written (false: the client is gone or
  // stopped reading): a producer sends the next piece only then, so a slow reader slows it.
  virtual void Send(std::string piece, std::function<void(bool ok)> sent) = 0;
  virtual void End() = 0;
  // `gone` runs once, on an I/O thread, if the client disconnects before the response is
  // complete; it is how a handler learns to cancel the work behind a response.
  virtual void OnClientGone(std::function<void()> gone) = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<HttpExchange>)>;

// HTTPS from PEM files, re-read every `reload` when they change (a rotated certificate is served
// to new connections without a restart). With a CA, clients must present a certificate it
// signed.
struct HttpTlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
  absl::Duration reload = absl::Seconds(60);
};

struct HttpServerOptions {
  std::optional<HttpTlsFiles> tls;  // nullopt: plain HTTP
  int threads = 2;
  size_t max_body_bytes = 8 << 20;     // more: 413
  size_t max_header_bytes = 16 << 10;  // more: 431
  // A request's headers and body must have arrived this long after its first byte.
  absl::Duration request_read_timeout = absl::Seconds(10);
  // A keep-alive connection without a request for this long is closed.
  absl::Duration idle_timeout = absl::Seconds(60);
  // A client that takes no bytes of a response for this long is dropped.
  absl::Duration write_timeout = absl::Seconds(60);
  size_t max_connections = 1024;  // more are answered 503 and closed
};

class HttpServer {
 public:
  // Binds `listen` (HOST:PORT; port 0 picks one) and serves. INVALID_ARGUMENT for a bad
  // address or TLS files that do not load, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           const HttpServerOptions& options,
                                                           HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Stops accepting and stops the I/O threads; responses not yet written are dropped. Exchanges
  // may still be called until the destructor, and must all be released before it.
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace yoco

#endif  // YOCO_LIB_HTTP_HTTP_SERVER_H_
