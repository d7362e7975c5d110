// ReadBoundedFile: reads a small file we did not write (params.json, a shard index) without
// trusting it: only a regular file is read (a FIFO would block open() forever, /dev/zero would
// never end), and only up to a size limit.
#ifndef YOCO_LIB_FILES_BOUNDED_FILE_H_
#define YOCO_LIB_FILES_BOUNDED_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace yoco {

// The whole file. NOT_FOUND when it cannot be opened; INVALID_ARGUMENT when it is not a regular
// file (after following symlinks) or holds more than `max_bytes`.
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, uint64_t max_bytes);

// Opens `path` for reading only if it is a regular file; the caller closes the descriptor.
// O_NONBLOCK during the open keeps a FIFO from blocking it.
absl::StatusOr<int> OpenRegularFile(const std::string& path);

}  // namespace yoco

#endif  // YOCO_LIB_FILES_BOUNDED_FILE_H_
