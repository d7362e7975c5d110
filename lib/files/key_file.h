// ReadKeyFile: reads a secret key the operator provides as a file (a Kubernetes Secret mounted
// into the pod, for instance): the transport key, the cache key.
#ifndef YOCO_LIB_FILES_KEY_FILE_H_
#define YOCO_LIB_FILES_KEY_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

inline constexpr size_t kMinKeyBytes = 16, kMaxKeyBytes = 4096;

// The key: a regular file of kMinKeyBytes to kMaxKeyBytes bytes; trailing newlines are not part
// of it. INVALID_ARGUMENT naming `what` and the path otherwise.
absl::StatusOr<std::string> ReadKeyFile(const std::string& path, absl::string_view what);

}  // namespace yoco

#endif  // YOCO_LIB_FILES_KEY_FILE_H_
