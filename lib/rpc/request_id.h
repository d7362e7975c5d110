// Where a request's id travels besides the request itself: the router returns it to gRPC
// clients in this trailing metadata key, and the HTTP front in the header of the same name, so a
// client can quote it and an operator can find the request's log lines on every service.
#ifndef YOCO_LIB_RPC_REQUEST_ID_H_
#define YOCO_LIB_RPC_REQUEST_ID_H_

namespace yoco {

inline constexpr char kRequestIdMetadata[] = "x-request-id";

}  // namespace yoco

#endif  // YOCO_LIB_RPC_REQUEST_ID_H_
