// The backend info gauge.
#include "lib/metrics/backend_info_export.h"

#include "prometheus/gauge.h"

namespace yoco {

void ExportBackendInfo(prometheus::Registry& registry, const std::string& backend,
                       const std::string& device) {
  prometheus::BuildGauge()
      .Name("yoco_worker_backend_info")
      .Help("The backend this worker runs the model on (value 1; see the labels)")
      .Register(registry)
      .Add({{"backend", backend}, {"device", device}})
      .Set(1);
}

}  // namespace yoco
