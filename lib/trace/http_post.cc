// A blocking POST with one deadline across connect, write and read (poll on a non-blocking
// socket), so an exporter thread is never stuck on a collector that stopped answering.
#include "lib/trace/http_post.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::DeadlineExceededError("the collector did not answer in time");
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return absl::UnavailableError(std::strerror(errno));
  }
}

absl::StatusOr<std::unique_ptr<Socket>> Connect(const HttpUrl& url, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", url.host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    auto socket = std::make_unique<Socket>(
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (socket->fd() < 0) continue;
    if (connect(socket->fd(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      continue;
    }
    if (absl::Status ready = WaitFor(socket->fd(), POLLOUT, deadline); !ready.ok()) return ready;
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(socket->fd(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error == 0) return socket;
    last_error = std::strerror(error);
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", url.host, ":", url.port, ": ", last_error));
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  constexpr absl::string_view kScheme = "http://";
  if (!absl::StartsWith(url, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url,
                     "\" is not an http:// URL (send to a collector on the node or in the pod; it "
                     "forwards with TLS)"));
  }
  url.remove_prefix(kScheme.size());
  HttpUrl out;
  const size_t slash = url.find('/');
  absl::string_view authority = url.substr(0, slash);
  if (slash != absl::string_view::npos) out.path = std::string(url.substr(slash));
  if (absl::StartsWith(authority, "[")) {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("unclosed [ in URL");
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') {
      return absl::InvalidArgumentError("junk after ] in URL");
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    authority = colon == absl::string_view::npos ? "" : authority.substr(colon);
  }
  if (!authority.empty()) {  // ":port"
    uint32_t port = 0;
    if (!absl::SimpleAtoi(authority.substr(1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port in \"", url, "\""));
    }
    out.port = absl::StrCat(port);
  }
  if (out.host.empty()) return absl::InvalidArgumentError("no host in URL");
  for (char c : out.host) {
    if (c <= 0x20 || c > 0x7e) return absl::InvalidArgumentError("bad character in the host");
  }
  for (char c : out.path) {
    if (c <= 0x20 || c > 0x7e) return absl::InvalidArgumentError("bad character in the path");
  }
  return out;
}

absl::StatusOr<int> PostHttp(const HttpUrl& url, absl::string_view content_type,
                             absl::string_view body, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<std::unique_ptr<Socket>> socket = Connect(url, deadline);
  if (!socket.ok()) return socket.status();
  const int fd = (*socket)->fd();
  const std::string request =
      absl::StrCat("POST ", url.path, " HTTP/1.1\r\nHost: ", url.host, ":", url.port,
                   "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                   "\r\nConnection: close\r\n\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    if (absl::Status ready = WaitFor(fd, POLLOUT, deadline); !ready.ok()) return ready;
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat("sending to the collector: ", std::strerror(errno)));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string response;
  while (response.find("\r\n") == std::string::npos) {
    if (absl::Status ready = WaitFor(fd, POLLIN, deadline); !ready.ok()) return ready;
    char buffer[512];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("reading the collector: ", std::strerror(errno)));
    }
    response.append(buffer, static_cast<size_t>(n));
    if (response.size() > 8192) break;
  }
  // "HTTP/1.1 200 OK"
  int code = 0;
  if (!absl::StartsWith(response, "HTTP/1.") || response.size() < 12 ||
      !absl::SimpleAtoi(absl::string_view(response).substr(9, 3), &code)) {
    return absl::UnavailableError("the collector's answer is not HTTP");
  }
  return code;
}

}  // namespace yoco
