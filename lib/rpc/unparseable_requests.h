// UnparseableRequestStatus: gRPC answers a request message that does not parse (bytes that are
// not the method's message, or a proto3 string field that is not UTF-8) with INTERNAL (unary
// methods) or UNIMPLEMENTED (callback server-streaming ones: Generate, Decode) and no
// message, which reads as a server bug and tells the client nothing. This interceptor turns it
// into INVALID_ARGUMENT saying what was wrong with the request.
#ifndef YOCO_LIB_RPC_UNPARSEABLE_REQUESTS_H_
#define YOCO_LIB_RPC_UNPARSEABLE_REQUESTS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace yoco {

// For ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> UnparseableRequestStatus();

}  // namespace yoco

#endif  // YOCO_LIB_RPC_UNPARSEABLE_REQUESTS_H_
