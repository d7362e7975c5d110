// The TLS flags every service takes: --tls-cert, --tls-key, --tls-ca, --tls-reload-seconds.
// A service serves with them and, where it calls other services (the router), calls with them.
#ifndef YOCO_LIB_RPC_TLS_FLAGS_H_
#define YOCO_LIB_RPC_TLS_FLAGS_H_

#include "lib/rpc/tls_credentials.h"

namespace yoco {

TlsFiles TlsFilesFromFlags();

}  // namespace yoco

#endif  // YOCO_LIB_RPC_TLS_FLAGS_H_
