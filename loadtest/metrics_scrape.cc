// Prometheus text and a minimal HTTP GET over a POSIX socket.
#include "loadtest/metrics_scrape.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace yoco {

std::map<std::string, double> ParsePrometheusText(absl::string_view text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    // The value follows the last space outside the labels' braces.
    const size_t close = line.rfind('}');
    const size_t space = line.find(' ', close == absl::string_view::npos ? 0 : close);
    if (space == absl::string_view::npos) continue;
    double value;
    absl::string_view rest = line.substr(space + 1);
    rest = rest.substr(0, rest.find(' '));  // a timestamp may follow
    if (!absl::SimpleAtod(rest, &value)) continue;
    out[std::string(line.substr(0, space))] = value;
  }
  return out;
}

absl::StatusOr<std::string> HttpGet(const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat(url, ": only http:// URLs"));
  }
  const size_t slash = rest.find('/');
  const std::string authority(rest.substr(0, slash));
  const std::string path =
      slash == absl::string_view::npos ? "/metrics" : std::string(rest.substr(slash));
  const size_t colon = authority.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError(url + ": no port");
  const std::string host = authority.substr(0, colon), port = authority.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat(url, ": cannot resolve ", host));
  }
  const int fd = socket(found->ai_family, SOCK_STREAM, 0);
  const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  if (!connected) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat(url, ": cannot connect"));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", authority, "\r\n\r\n");
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 500) <= 0) continue;
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
    if (response.size() > (64u << 20)) break;
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || body == std::string::npos ||
      response.find(" 200 ") > response.find("\r\n")) {
    return absl::UnavailableError(absl::StrCat(url, ": no 200 response"));
  }
  return response.substr(body + 4);
}

std::map<std::string, double> ChangedSeries(const std::map<std::string, double>& before,
                                            const std::map<std::string, double>& after) {
  std::map<std::string, double> out;
  for (const auto& [series, value] : after) {
    auto it = before.find(series);
    const double delta = value - (it == before.end() ? 0.0 : it->second);
    if (delta != 0 && !std::isnan(delta)) out[series] = delta;  // NaN: an empty summary
  }
  return out;
}

}  // namespace yoco
