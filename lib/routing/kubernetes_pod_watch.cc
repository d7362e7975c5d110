// The list-then-watch loop as one C++20 coroutine on a private io_context. Every network step has
// a deadline (the tcp_stream's expiry); errors come back as error codes (redirect_error), never as
// exceptions across this file's boundary.
#include "lib/routing/kubernetes_pod_watch.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/files/bounded_file.h"
#include "lib/log/log.h"

namespace yoco {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::use_awaitable;
using Stream = beast::ssl_stream<beast::tcp_stream>;

constexpr uint64_t kMaxTokenBytes = 64 << 10, kMaxCaBytes = 1 << 20;

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

}  // namespace

absl::StatusOr<KubernetesApi> KubernetesApi::FromServer(const std::string& server) {
  KubernetesApi api;
  if (server.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') {
      return absl::FailedPreconditionError(
          "k8s:// discovery outside a pod needs --k8s-api-server (KUBERNETES_SERVICE_HOST is not "
          "set)");
    }
    api.host = host;
    uint32_t p = 443;
    if (port != nullptr && (!absl::SimpleAtoi(port, &p) || p == 0 || p > 65535)) {
      return absl::InvalidArgumentError(
          absl::StrCat("KUBERNETES_SERVICE_PORT '", port, "' is not a port"));
    }
    api.port = static_cast<uint16_t>(p);
    return api;
  }
  if (server.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--k8s-api-server '", server, "': expected https://HOST:PORT"));
  }
  std::string rest = server.substr(8);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  uint32_t p = 0;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(rest.substr(colon + 1), &p) ||
      p == 0 || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--k8s-api-server '", server, "': expected https://HOST:PORT"));
  }
  api.host = rest.substr(0, colon);
  if (api.host.size() > 2 && api.host.front() == '[' && api.host.back() == ']') {
    api.host = api.host.substr(1, api.host.size() - 2);
  }
  api.port = static_cast<uint16_t>(p);
  return api;
}

class KubernetesPodWatch::Impl {
 public:
  Impl(KubernetesApi api, KubernetesWorkerTarget target, PodWatchOptions options, std::string what)
      : api_(std::move(api)),
        target_(std::move(target)),
        options_(options),
        what_(std::move(what)) {
    asio::co_spawn(io_, Run(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }

  ~Impl() {
    io_.stop();
    thread_.join();
  }

  absl::StatusOr<std::vector<std::string>> Addresses() const {
    absl::MutexLock lock(&mu_);
    if (!listed_) return absl::UnavailableError("no pod list from the Kubernetes API yet");
    return WorkerAddresses(pods_, target_.port);
  }

  Counters counters() const {
    absl::MutexLock lock(&mu_);
    return counters_;
  }

 private:
  // What a request ended with, beyond OK: the HTTP status when there was one.
  struct Outcome {
    absl::Status status;
    unsigned http_status = 0;
  };

  awaitable<void> Run() {
    std::string resource_version;
    bool need_list = true;
    absl::Duration backoff = options_.min_backoff;
    asio::steady_timer timer(io_);
    while (true) {
      Outcome outcome;
      if (need_list) {
        co_await List(&resource_version, &outcome);
      } else {
        co_await Watch(&resource_version, &outcome);
      }
      if (outcome.http_status == 410) {  // too old a version (status or event): list again now
        absl::MutexLock lock(&mu_);
        ++counters_.gone;
        need_list = true;
        continue;
      }
      if (outcome.status.ok()) {
        need_list = false;
        backoff = options_.min_backoff;
        Report(absl::OkStatus());
        continue;  // a watch the server ended in order: watch again at once
      }
      Report(outcome.status);
      {
        absl::MutexLock lock(&mu_);
        ++counters_.failures;
        if (outcome.http_status == 401 || outcome.http_status == 403) ++counters_.forbidden;
      }
      // Jittered exponential backoff, so a restarted API server is not hit by every router at
      // once.
      std::uniform_real_distribution<double> jitter(0.5, 1.0);
      timer.expires_after(Chrono(backoff * jitter(rng_)));
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }

  // One log line per change of state, not one per retry.
  void Report(const absl::Status& status) {
    const std::string line = status.ok() ? "" : std::string(status.message());
    if (line == last_report_) return;
    size_t known;
    {
      absl::MutexLock lock(&mu_);
      known = WorkerAddresses(pods_, target_.port).size();
    }
    if (status.ok()) {
      LogInfo("the Kubernetes API answers again").With("what", what_).With("workers", known);
    } else {
      LogWarning("Kubernetes discovery failed; keeping the known workers")
          .With("what", what_)
          .With("error", line)
          .With("known", known);
    }
    last_report_ = line;
  }

  // The coroutines below take their parameters by value or pointer and report through `out`:
  // a reference to a caller's temporary would dangle once they suspend, and g++ 12 mishandles
  // non-trivial values returned by co_return (an absl::Status came back freed).

  // Connects and sends GET `target` with the service account's token (read now: it rotates).
  awaitable<void> Open(Stream& stream, std::string target, Outcome* out) {
    absl::StatusOr<std::string> token = ReadBoundedFile(api_.token_file, kMaxTokenBytes);
    if (!token.ok()) {
      out->status = absl::UnavailableError(
          absl::StrCat("service account token ", api_.token_file, ": ", token.status().message()));
      co_return;
    }
    boost::system::error_code ec;
    auto& lowest = beast::get_lowest_layer(stream);
    lowest.expires_after(Chrono(options_.request_timeout));
    asio::ip::tcp::resolver resolver(io_);
    auto endpoints = co_await resolver.async_resolve(api_.host, std::to_string(api_.port),
                                                     asio::redirect_error(use_awaitable, ec));
    if (!ec) co_await lowest.async_connect(endpoints, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      out->status =
          absl::UnavailableError(absl::StrCat("cannot connect to the Kubernetes API at ", api_.host,
                                              ":", api_.port, ": ", ec.message()));
      co_return;
    }
    boost::system::error_code not_an_address;
    asio::ip::make_address(api_.host, not_an_address);
    if (not_an_address) SSL_set_tlsext_host_name(stream.native_handle(), api_.host.c_str());
    stream.set_verify_mode(asio::ssl::verify_peer);
    stream.set_verify_callback(asio::ssl::host_name_verification(api_.host));
    co_await stream.async_handshake(asio::ssl::stream_base::client,
                                    asio::redirect_error(use_awaitable, ec));
    if (ec) {
      out->status = absl::UnavailableError(
          absl::StrCat("TLS with the Kubernetes API failed (is ", api_.ca_file,
                       " its CA, and does its certificate name ", api_.host, "?): ", ec.message()));
      co_return;
    }
    http::request<http::empty_body> request(http::verb::get, target, 11);
    request.set(http::field::host, api_.host);
    request.set(http::field::authorization,
                "Bearer " + std::string(absl::StripAsciiWhitespace(*token)));
    request.set(http::field::accept, "application/json");
    request.set(http::field::user_agent, "yoco-router");
    co_await http::async_write(stream, request, asio::redirect_error(use_awaitable, ec));
    if (ec) out->status = absl::UnavailableError("sending to the Kubernetes API: " + ec.message());
  }

  absl::StatusOr<std::unique_ptr<asio::ssl::context>> TlsContext() {
    absl::StatusOr<std::string> ca = ReadBoundedFile(api_.ca_file, kMaxCaBytes);
    if (!ca.ok()) {
      return absl::UnavailableError(
          absl::StrCat("the Kubernetes API's CA ", api_.ca_file, ": ", ca.status().message()));
    }
    auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    context->add_certificate_authority(asio::buffer(*ca), ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("the Kubernetes API's CA ", api_.ca_file, ": ", ec.message()));
    }
    return context;
  }

  // An HTTP status that is not 200, as the outcome to report.
  Outcome Refused(unsigned status, const std::string& body, const char* what) {
    const std::string message = ApiErrorMessage(body);
    if (status == 401 || status == 403) {
      return {absl::PermissionDeniedError(absl::StrCat(
                  "the Kubernetes API refused to ", what, " pods (", status, "): ", message,
                  ". The router's service account needs get, list and watch on pods in "
                  "namespace ",
                  target_.ns, " (a Role and RoleBinding; see deploy/k8s)")),
              status};
    }
    return {absl::UnavailableError(
                absl::StrCat("the Kubernetes API answered ", status, " to ", what, ": ", message)),
            status};
  }

  awaitable<void> List(std::string* resource_version, Outcome* out) {
    absl::StatusOr<std::unique_ptr<asio::ssl::context>> tls = TlsContext();
    if (!tls.ok()) {
      out->status = tls.status();
      co_return;
    }
    Stream stream(io_, **tls);
    co_await Open(stream, absl::StrCat(target_.PodsPath(), "?", target_.Query(false, "", 0)), out);
    if (!out->status.ok()) co_return;
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(options_.max_event_bytes);
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      out->status = absl::UnavailableError("reading the pod list: " + ec.message());
      co_return;
    }
    const auto& response = parser.get();
    if (response.result_int() != 200) {
      *out = Refused(response.result_int(), response.body(), "list");
      co_return;
    }
    absl::StatusOr<PodList> list = ParsePodList(response.body());
    if (!list.ok()) {
      out->status = absl::UnavailableError(
          absl::StrCat("the pod list does not parse: ", list.status().message()));
      co_return;
    }
    absl::MutexLock lock(&mu_);
    pods_.clear();
    for (PodView& pod : list->pods) pods_[pod.name] = std::move(pod);
    *resource_version = list->resource_version;
    listed_ = true;
    ++counters_.lists;
  }

  // Applies one line of the watch stream. A 410 ERROR event comes back as http_status 410.
  Outcome Apply(const std::string& line, std::string* resource_version) {
    absl::StatusOr<WatchEvent> event = ParseWatchEvent(line);
    if (!event.ok()) {
      return {absl::UnavailableError(
          absl::StrCat("a watch event does not parse: ", event.status().message()))};
    }
    absl::MutexLock lock(&mu_);
    switch (event->type) {
      case WatchEvent::Type::kError:
        if (event->error_code == 410) return {absl::OkStatus(), 410};
        return {absl::UnavailableError(
            absl::StrCat("the watch failed (", event->error_code, "): ", event->error_message))};
      case WatchEvent::Type::kBookmark:
        ++counters_.bookmarks;
        break;
      case WatchEvent::Type::kDeleted:
        pods_.erase(event->pod.name);
        break;
      case WatchEvent::Type::kAdded:
      case WatchEvent::Type::kModified:
        pods_[event->pod.name] = event->pod;
        break;
    }
    if (!event->resource_version.empty()) *resource_version = event->resource_version;
    return {absl::OkStatus()};
  }

  awaitable<void> Watch(std::string* resource_version, Outcome* out) {
    absl::StatusOr<std::unique_ptr<asio::ssl::context>> tls = TlsContext();
    if (!tls.ok()) {
      out->status = tls.status();
      co_return;
    }
    Stream stream(io_, **tls);
    co_await Open(
        stream,
        absl::StrCat(target_.PodsPath(), "?",
                     target_.Query(true, *resource_version, options_.watch_timeout_seconds)),
        out);
    if (!out->status.ok()) co_return;
    {
      absl::MutexLock lock(&mu_);
      ++counters_.watches;
    }
    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    // A watch streams for as long as the server keeps it open. (Not boost::none: Beast 1.74
    // compares a Content-Length against the optional, and every length exceeds "none".)
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    boost::system::error_code ec;
    co_await http::async_read_header(stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) {
      out->status = absl::UnavailableError("reading the watch: " + ec.message());
      co_return;
    }
    const unsigned status = parser.get().result_int();
    std::string pending;  // bytes of the event not yet ended by a newline
    std::vector<char> chunk(64 << 10);
    auto& lowest = beast::get_lowest_layer(stream);
    while (!parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      lowest.expires_after(Chrono(options_.watch_idle_timeout));
      // read_some: an event must be applied when it arrives, not when the buffer fills.
      co_await http::async_read_some(stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        out->status = absl::UnavailableError("the watch connection dropped: " + ec.message());
        co_return;
      }
      const size_t new_bytes_at = pending.size();  // earlier bytes hold no newline
      pending.append(chunk.data(), chunk.size() - parser.get().body().size);
      if (status != 200) {
        if (pending.size() > options_.max_event_bytes) break;
        continue;  // the error body, read whole below
      }
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', std::max(start, new_bytes_at))) != std::string::npos;
           start = nl + 1) {
        const std::string line = pending.substr(start, nl - start);
        if (absl::StripAsciiWhitespace(line).empty()) continue;
        *out = Apply(line, resource_version);
        if (!out->status.ok() || out->http_status != 0) co_return;
      }
      pending.erase(0, start);
      if (pending.size() > options_.max_event_bytes) {
        out->status = absl::UnavailableError("a watch event exceeds the size limit");
        co_return;
      }
    }
    if (status != 200) *out = Refused(status, pending, "watch");
  }

  const KubernetesApi api_;
  const KubernetesWorkerTarget target_;
  const PodWatchOptions options_;
  const std::string what_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::string last_report_;  // the watch thread's
  mutable absl::Mutex mu_;
  std::map<std::string, PodView> pods_ ABSL_GUARDED_BY(mu_);  // by pod name
  bool listed_ ABSL_GUARDED_BY(mu_) = false;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  asio::io_context io_;
  std::thread thread_;  // last: it runs io_, which uses the members above
};

KubernetesPodWatch::KubernetesPodWatch(KubernetesApi api, KubernetesWorkerTarget target,
                                       PodWatchOptions options, std::string what)
    : impl_(std::make_unique<Impl>(std::move(api), std::move(target), options, std::move(what))) {}

KubernetesPodWatch::~KubernetesPodWatch() = default;

absl::StatusOr<std::vector<std::string>> KubernetesPodWatch::Addresses() const {
  return impl_->Addresses();
}

KubernetesPodWatch::Counters KubernetesPodWatch::counters() const { return impl_->counters(); }

}  // namespace yoco
