// TempFolder: mkdtemp on the way in, a recursive removal on the way out.
#include "lib/files/temp_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace yoco {

absl::StatusOr<TempFolder> TempFolder::Create(absl::string_view prefix) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create a temporary folder: no temp directory (", ec.message(), ")"));
  }
  std::string path = (dir / absl::StrCat(prefix, "-XXXXXX")).string();
  if (mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a temporary folder ", path, ": ", std::strerror(errno)));
  }
  return TempFolder(std::move(path), getpid());
}

TempFolder::TempFolder(TempFolder&& other) noexcept
    : path_(std::exchange(other.path_, std::string())), owner_(other.owner_) {}

TempFolder& TempFolder::operator=(TempFolder&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, std::string());
    owner_ = other.owner_;
  }
  return *this;
}

TempFolder::~TempFolder() { Remove(); }

void TempFolder::Remove() {
  if (path_.empty() || getpid() != owner_) return;
  std::error_code ec;  // best effort: a folder someone else removed is not an error
  std::filesystem::remove_all(path_, ec);
  path_.clear();
}

}  // namespace yoco
