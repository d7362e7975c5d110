// Lookups: the system's resolver through getaddrinfo (as gRPC's dns:/// resolves: /etc/hosts,
// nsswitch, DNS with its search domains), or one named DNS server through glibc's res_nsearch.
#include "lib/routing/dns_lookup.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

absl::StatusOr<uint16_t> ParsePort(const std::string& text, const std::string& spec) {
  uint32_t port = 0;
  if (!absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(spec, ": '", text, "' is not a port"));
  }
  return static_cast<uint16_t>(port);
}

// HOST:PORT, HOST without brackets (names and IPv4 addresses).
absl::Status SplitHostPort(const std::string& text, const std::string& spec, std::string* host,
                           uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat(spec, ": expected NAME:PORT, got '", text, "'"));
  }
  *host = text.substr(0, colon);
  absl::StatusOr<uint16_t> p = ParsePort(text.substr(colon + 1), spec);
  if (!p.ok()) return p.status();
  *port = *p;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DnsWorkerTarget> DnsWorkerTarget::Parse(const std::string& spec) {
  if (spec.rfind("dns://", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec, ": expected dns:///NAME:PORT or dns://DNS-SERVER:PORT/NAME:PORT"));
  }
  const std::string rest = spec.substr(6);
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(spec, ": expected dns:///NAME:PORT"));
  }
  DnsWorkerTarget target;
  if (slash > 0) {
    if (absl::Status st =
            SplitHostPort(rest.substr(0, slash), spec, &target.server, &target.server_port);
        !st.ok()) {
      return st;
    }
    in_addr ignored{};
    if (inet_pton(AF_INET, target.server.c_str(), &ignored) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec, ": the DNS server must be an IPv4 address"));
    }
  }
  if (absl::Status st = SplitHostPort(rest.substr(slash + 1), spec, &target.name, &target.port);
      !st.ok()) {
    return st;
  }
  return target;
}

namespace {

// The system's resolver as gRPC's dns:/// uses it: getaddrinfo, so /etc/hosts (localhost) and
// nsswitch count as well as DNS with its search domains (res_nsearch alone skips /etc/hosts).
absl::StatusOr<std::vector<std::string>> ResolveWithSystem(const std::string& name, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc == EAI_NONAME || rc == EAI_NODATA) return std::vector<std::string>{};  // no such name
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("lookup of ", name, " failed: ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, text,
                sizeof text);
      out.push_back(absl::StrCat(text, ":", port));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                sizeof text);
      out.push_back(absl::StrCat("[", text, "]:", port));
    }
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> DnsWorkerTarget::Resolve() const {
  if (server.empty()) {
    absl::StatusOr<std::vector<std::string>> out = ResolveWithSystem(name, port);
    if (!out.ok()) return out;
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
    return out;
  }
  struct __res_state state;
  std::memset(&state, 0, sizeof state);
  if (res_ninit(&state) != 0) return absl::UnavailableError("cannot initialise the resolver");
  state.nscount = 1;
  state.nsaddr_list[0].sin_family = AF_INET;
  state.nsaddr_list[0].sin_port = htons(server_port);
  inet_pton(AF_INET, server.c_str(), &state.nsaddr_list[0].sin_addr);
  state.retrans = 1;  // seconds: a slow DNS server must not hold discovery long
  state.retry = 2;
  std::vector<std::string> out;
  bool answered = false;
  for (int type : {ns_t_a, ns_t_aaaa}) {
    unsigned char answer[8192];
    const int n = res_nsearch(&state, name.c_str(), ns_c_in, type, answer, sizeof answer);
    if (n < 0) {
      // No such name, or no record of this type: an answer all the same.
      if (state.res_h_errno == HOST_NOT_FOUND || state.res_h_errno == NO_DATA) answered = true;
      continue;
    }
    answered = true;
    ns_msg message;
    if (ns_initparse(answer, n, &message) != 0) continue;
    for (int i = 0; i < ns_msg_count(message, ns_s_an); ++i) {
      ns_rr record;
      if (ns_parserr(&message, ns_s_an, i, &record) != 0 || ns_rr_type(record) != type) continue;
      char text[INET6_ADDRSTRLEN] = {};
      if (type == ns_t_a && ns_rr_rdlen(record) == 4) {
        inet_ntop(AF_INET, ns_rr_rdata(record), text, sizeof text);
        out.push_back(absl::StrCat(text, ":", port));
      } else if (type == ns_t_aaaa && ns_rr_rdlen(record) == 16) {
        inet_ntop(AF_INET6, ns_rr_rdata(record), text, sizeof text);
        out.push_back(absl::StrCat("[", text, "]:", port));
      }
    }
  }
  res_nclose(&state);
  if (!answered) {
    return absl::UnavailableError(absl::StrCat("DNS lookup of ", name, " failed"));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace yoco
