// The checks a Generate call passes before any worker is asked: its request id, its caller's
// scope (tenant, salt), the request itself, and the tenant's limits. What they establish (the
// request id, the checked request, the tenant's lease, where it waits at the workers) is what the
// rest of the call runs on.
#ifndef YOCO_SERVICES_ROUTER_GENERATE_ADMISSION_H_
#define YOCO_SERVICES_ROUTER_GENERATE_ADMISSION_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "lib/auth/tenant_usage.h"
#include "services/router/request_checks.h"
#include "services/router/request_trace.h"
#include "services/router/worker_pool.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

struct AdmittedGenerate {
  std::string request_id;  // the client's, or one the router made
  CallScope scope;
  CheckedGenerateRequest call;
  std::unique_ptr<TenantUsage::Lease> tenant_lease;  // while the request runs, under --tenants
  v1::Scheduling scheduling;  // where it waits at the workers (priority, tenant, weight)
};

// Admits `request`, filling `admitted` as far as the checks get (a refused call's access log
// line names what was known: its request id, its tenant). A refusal is returned with the trailing
// metadata that explains it (the invalid field, when to retry) added to `context`; the request id
// goes into the trailers as soon as it is known.
absl::Status AdmitGenerate(WorkerPool& pool, grpc::CallbackServerContext& context,
                           const v1::GenerateRequest& request, RequestTrace& trace,
                           AdmittedGenerate& admitted);

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_GENERATE_ADMISSION_H_
