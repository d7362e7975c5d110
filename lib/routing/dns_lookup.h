// DnsWorkerTarget: "dns:///NAME:PORT" (the system's resolver: /etc/hosts and DNS with its
// search domains, as gRPC's own dns:/// target) or
// "dns://SERVER:DNSPORT/NAME:PORT" (that DNS server, as in gRPC's target syntax), resolved to
// one "IP:PORT" per A and AAAA record. A Kubernetes headless Service publishes one record per
// ready pod, so the records are the workers.
#ifndef YOCO_LIB_ROUTING_DNS_LOOKUP_H_
#define YOCO_LIB_ROUTING_DNS_LOOKUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yoco {

struct DnsWorkerTarget {
  std::string server;  // IPv4 address of the DNS server; empty: the system's
  uint16_t server_port = 53;
  std::string name;
  uint16_t port = 0;  // the workers'

  static bool Matches(const std::string& spec) { return spec.rfind("dns:", 0) == 0; }
  // INVALID_ARGUMENT naming what is wrong with `spec`.
  static absl::StatusOr<DnsWorkerTarget> Parse(const std::string& spec);

  // The workers' addresses, sorted. An empty list when the name does not exist (NXDOMAIN, or no
  // records: every pod is gone); UNAVAILABLE when the lookup itself failed (keep the last set).
  absl::StatusOr<std::vector<std::string>> Resolve() const;
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_DNS_LOOKUP_H_
