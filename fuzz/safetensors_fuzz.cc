// A safetensors file (header and tensor table) from any bytes: opened through a memfd, as the
// loader opens a file on disk. Every tensor it accepts lies inside the file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/engine/dtype.h"
#include "lib/engine/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("safetensors", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto file = yoco::SafetensorsFile::Open(path);
  if (file.ok()) {
    for (const auto& [name, view] : file->tensors()) {
      // Touch the first and last byte: ASan reports a view outside the mapping.
      const int64_t bytes = view.num_elements() * yoco::DTypeSize(view.dtype);
      if (bytes > 0) {
        volatile uint8_t first = static_cast<const uint8_t*>(view.data)[0];
        volatile uint8_t last = static_cast<const uint8_t*>(view.data)[bytes - 1];
        (void)first;
        (void)last;
      }
    }
  }
  close(fd);
  return 0;
}
