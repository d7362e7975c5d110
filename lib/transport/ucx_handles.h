// Owning handles for UCX objects: each C handle in a unique_ptr with a one-line deleter, so no
// code path frees by hand.
#ifndef YOCO_LIB_TRANSPORT_UCX_HANDLES_H_
#define YOCO_LIB_TRANSPORT_UCX_HANDLES_H_

#include <ucp/api/ucp.h>

#include <memory>

namespace yoco {

struct UcpConfigDeleter {
  void operator()(ucp_config_t* c) const { ucp_config_release(c); }
};
struct UcpContextDeleter {
  void operator()(ucp_context* c) const { ucp_cleanup(c); }
};
struct UcpWorkerDeleter {
  void operator()(ucp_worker* w) const { ucp_worker_destroy(w); }
};
struct UcpAddressDeleter {
  ucp_worker_h worker;
  void operator()(ucp_address_t* a) const { ucp_worker_release_address(worker, a); }
};

using UcpConfigPtr = std::unique_ptr<ucp_config_t, UcpConfigDeleter>;
using UcpContextPtr = std::unique_ptr<ucp_context, UcpContextDeleter>;
using UcpWorkerPtr = std::unique_ptr<ucp_worker, UcpWorkerDeleter>;
using UcpAddressPtr = std::unique_ptr<ucp_address_t, UcpAddressDeleter>;

}  // namespace yoco

#endif  // YOCO_LIB_TRANSPORT_UCX_HANDLES_H_
