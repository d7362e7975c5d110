// When a refused call may be tried again: the router sends it with a RESOURCE_EXHAUSTED that a
// retry can cure (a tenant over its limits) in this trailing metadata key, in milliseconds; the
// HTTP front turns it into the Retry-After header (whole seconds, rounded up).
#ifndef YOCO_LIB_RPC_RETRY_AFTER_H_
#define YOCO_LIB_RPC_RETRY_AFTER_H_

namespace yoco {

inline constexpr char kRetryAfterMsMetadata[] = "yoco-retry-after-ms";

}  // namespace yoco

#endif  // YOCO_LIB_RPC_RETRY_AFTER_H_
