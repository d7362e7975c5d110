// TempFolder: a fresh folder under the temp directory ($TMPDIR, else /tmp) that is removed with
// everything in it when its owner goes away, so benchmarks and tests that write models leave
// nothing behind (each test process used to leave ~100 MB of random checkpoints).
#ifndef YOCO_LIB_FILES_TEMP_FOLDER_H_
#define YOCO_LIB_FILES_TEMP_FOLDER_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

class TempFolder {
 public:
  // A new folder named `prefix` plus a random suffix; INTERNAL when it cannot be made.
  static absl::StatusOr<TempFolder> Create(absl::string_view prefix);

  TempFolder(TempFolder&& other) noexcept;
  TempFolder& operator=(TempFolder&& other) noexcept;
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  // Removes the folder, only in the process that made it: a forked child that exits must not
  // take its parent's files with it.
  ~TempFolder();

  const std::string& path() const { return path_; }

 private:
  TempFolder(std::string path, pid_t owner) : path_(std::move(path)), owner_(owner) {}
  void Remove();

  std::string path_;  // empty once moved from
  pid_t owner_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_FILES_TEMP_FOLDER_H_
