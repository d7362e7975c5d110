// QuietProtobufLogs: protobuf logs one line per string field that is not valid UTF-8 when it
// parses a message, so any client could write a log line per request it sends (and fill a
// node's disk). The services keep protobuf's messages but print at most one per second, with a
// count of those held back.
#ifndef YOCO_LIB_RPC_QUIET_PROTOBUF_LOGS_H_
#define YOCO_LIB_RPC_QUIET_PROTOBUF_LOGS_H_

#include <cstdint>

namespace yoco {

// Installs the handler (process-wide; call before serving).
void QuietProtobufLogs();

// Messages held back so far (for tests).
uint64_t SuppressedProtobufLogs();

}  // namespace yoco

#endif  // YOCO_LIB_RPC_QUIET_PROTOBUF_LOGS_H_
