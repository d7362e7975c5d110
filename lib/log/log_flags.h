// --log-format and --log-level, which every program that parses its flags with
// ParseServiceFlags takes.
#ifndef YOCO_LIB_LOG_LOG_FLAGS_H_
#define YOCO_LIB_LOG_LOG_FLAGS_H_

#include <string>

#include "absl/status/status.h"

namespace yoco {

// Configures the log from the flags for `program`; INVALID_ARGUMENT naming a bad value.
absl::Status ConfigureLogFromFlags(const std::string& program);

}  // namespace yoco

#endif  // YOCO_LIB_LOG_LOG_FLAGS_H_
