// Regular files only, bounded reads.
#include "lib/files/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace yoco {

absl::StatusOr<int> OpenRegularFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  // Reads block normally from here on.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  std::string out;
  absl::Status status;
  if (fstat(*fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > max_bytes) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than the ", max_bytes, "-byte limit for this file"));
  } else {
    // Read one byte past the limit: a file that grew after fstat is refused too.
    out.resize(static_cast<size_t>(st.st_size) + 1);
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::read(*fd, out.data() + got, out.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status =
            absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
        break;
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
      if (got > max_bytes) {
        status = absl::InvalidArgumentError(
            absl::StrCat(path, ": larger than the ", max_bytes, "-byte limit for this file"));
        break;
      }
    }
    out.resize(got);
  }
  ::close(*fd);
  if (!status.ok()) return status;
  return out;
}

}  // namespace yoco
