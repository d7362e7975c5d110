// .npy reading and writing.
#include "lib/engine/npy.h"

#include <fstream>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace yoco {

absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      const float* data) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  // numpy's tuple syntax: "(5,)" for one dimension, "(3, 4)" for more.
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (", dims, "), }");
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(count * sizeof(float)));
  if (!out) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  char magic[8];
  uint16_t len = 0;
  if (!in.read(magic, 8) || std::string(magic, 6) != "\x93NUMPY" || magic[6] != 1 ||
      !in.read(reinterpret_cast<char*>(&len), 2)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a version 1.0 .npy file"));
  }
  std::string header(len, '\0');
  if (!in.read(header.data(), len))
    return absl::DataLossError(absl::StrCat(path, ": truncated header"));
  if (header.find("'<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": only C-order little-endian float32 is supported"));
  }
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'shape': \\(([^)]*)\\)"))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no shape in header"));
  }
  NpyArray arr;
  int64_t count = 1;
  for (absl::string_view part : absl::StrSplit(m[1].str(), ',', absl::SkipWhitespace())) {
    int64_t d;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape"));
    }
    arr.shape.push_back(d);
    count *= d;
  }
  arr.data.resize(count);
  if (!in.read(reinterpret_cast<char*>(arr.data.data()),
               static_cast<std::streamsize>(count * sizeof(float)))) {
    return absl::DataLossError(absl::StrCat(path, ": truncated data"));
  }
  return arr;
}

}  // namespace yoco
