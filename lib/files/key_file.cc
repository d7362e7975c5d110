// Key files: read bounded, regular files only.
#include "lib/files/key_file.h"

#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"

namespace yoco {

absl::StatusOr<std::string> ReadKeyFile(const std::string& path, absl::string_view what) {
  // Regular files only (a FIFO would block, /dev/zero never end), bounded; two bytes of slack
  // for a trailing newline.
  absl::StatusOr<std::string> key = ReadBoundedFile(path, kMaxKeyBytes + 2);
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": ", key.status().message()));
  }
  while (!key->empty() && (key->back() == '\n' || key->back() == '\r')) key->pop_back();
  if (key->size() < kMinKeyBytes || key->size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": needs ", kMinKeyBytes,
                                                   " to ", kMaxKeyBytes, " bytes, has ",
                                                   key->size()));
  }
  return key;
}

}  // namespace yoco
