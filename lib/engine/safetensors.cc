// Safetensors parsing with every header field checked before use: the file may come from
// anywhere, and a bad one must be an error, never an out-of-bounds read.
#include "lib/engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"
#include "lib/model/strict_json.h"
#include "lib/status/status_macros.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxIndexBytes = 16 << 20;

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// Parses one header entry into `view` (without its data pointer); `data_size` is the number of
// bytes after the header.
absl::Status ParseEntry(const std::string& path, const std::string& name, const Json& entry,
                        uint64_t data_size, TensorView* view, uint64_t* begin) {
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (!entry.is_object()) return Invalid(path, where + ": header entry is not an object");
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) {
    return Invalid(path, where + ": missing or non-string 'dtype'");
  }
  const std::string dtype_name = entry["dtype"].get<std::string>();
  auto dtype = DTypeFromName(dtype_name);
  if (!dtype) {
    return Invalid(path, absl::StrCat(where, ": unsupported dtype '", dtype_name,
                                      "' (supported: F32, BF16, F16)"));
  }
  if (!entry.contains("shape") || !entry["shape"].is_array()) {
    return Invalid(path, where + ": missing or non-array 'shape'");
  }
  uint64_t count = 1;
  std::vector<int64_t> shape;
  for (const Json& d : entry["shape"]) {
    if (!d.is_number_unsigned())
      return Invalid(path, where + ": shape has a non-integer or negative dimension");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > (uint64_t{1} << 40) || (dim != 0 && count > (uint64_t{1} << 40) / dim)) {
      return Invalid(path, where + ": shape is absurdly large");
    }
    count *= dim;
    shape.push_back(static_cast<int64_t>(dim));
  }
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2 || !entry["data_offsets"][0].is_number_unsigned() ||
      !entry["data_offsets"][1].is_number_unsigned()) {
    return Invalid(path, where + ": 'data_offsets' must be two non-negative integers");
  }
  const uint64_t b = entry["data_offsets"][0].get<uint64_t>();
  const uint64_t e = entry["data_offsets"][1].get<uint64_t>();
  if (b > e) return Invalid(path, where + ": data_offsets begin > end");
  if (e > data_size) {
    return absl::DataLossError(absl::StrCat(path, ": ", where, ": data ends at byte ", e,
                                            " but the file holds only ", data_size,
                                            " data bytes (truncated file?)"));
  }
  if (e - b != count * static_cast<uint64_t>(DTypeSize(*dtype))) {
    return Invalid(path,
                   absl::StrCat(where, ": ", e - b, " data bytes do not match shape and dtype (",
                                count * DTypeSize(*dtype), " expected)"));
  }
  view->name = name;
  view->dtype = *dtype;
  view->shape = std::move(shape);
  *begin = b;
  return absl::OkStatus();
}

}  // namespace

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (mapping_) munmap(mapping_, mapping_size_);
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_size_ = std::exchange(other.mapping_size_, 0);
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) munmap(mapping_, mapping_size_);
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  // A FIFO or device would block or never end: regular files only.
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat ", path));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::DataLossError(
        absl::StrCat(path, ": file of ", size, " bytes is too short for a safetensors header"));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return absl::InternalError(absl::StrCat("cannot mmap ", path, ": ", std::strerror(errno)));

  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = map;
  file.mapping_size_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes) {
    return Invalid(path, absl::StrCat("header length ", header_len, " exceeds the ",
                                      kMaxHeaderBytes, "-byte limit (not a safetensors file?)"));
  }
  if (header_len > size - 8) {
    return absl::DataLossError(absl::StrCat(path, ": header length ", header_len,
                                            " runs past the end of the ", size,
                                            "-byte file (truncated file?)"));
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  // Tensor entries nest three deep (header, entry, shape); __metadata__ is a flat map.
  absl::StatusOr<Json> parsed = ParseStrictJson(absl::string_view(header_begin, header_len),
                                                {.max_depth = 4, .max_values = size_t{1} << 22});
  if (!parsed.ok()) return Invalid(path, absl::StrCat("header: ", parsed.status().message()));
  const Json& header = *parsed;
  if (!header.is_object()) return Invalid(path, "header is not a JSON object");

  const uint64_t data_size = size - 8 - header_len;
  const uint8_t* data = bytes + 8 + header_len;
  std::multimap<uint64_t, std::pair<uint64_t, std::string>> extents;  // begin -> (end, name)
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    TensorView view;
    uint64_t begin = 0;
    RETURN_IF_ERROR(ParseEntry(path, name, entry, data_size, &view, &begin));
    const uint64_t end = begin + static_cast<uint64_t>(view.num_elements()) * DTypeSize(view.dtype);
    if (end > begin) extents.emplace(begin, std::make_pair(end, name));  // empty ones may share
    view.data = data + begin;
    file.tensors_.emplace(name, std::move(view));
  }
  // Overlapping tensors would alias each other's bytes: a forged file, never a real one.
  uint64_t previous_end = 0;
  std::string previous;
  for (const auto& [begin, end_name] : extents) {
    if (begin < previous_end) {
      return Invalid(path, absl::StrCat("tensors '", previous, "' and '", end_name.second,
                                        "' overlap in the data section"));
    }
    previous_end = end_name.first;
    previous = end_name.second;
  }
  return file;
}

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint ckpt;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (fs::exists(single_path, ec)) {
    ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(single_path.string()));
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
    ckpt.tensors_ = ckpt.files_.back()->tensors();
    return ckpt;
  }
  if (!fs::exists(index_path, ec)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": neither model.safetensors nor model.safetensors.index.json exists"));
  }
  const std::string ipath = index_path.string();
  ASSIGN_OR_RETURN(const std::string index_text, ReadBoundedFile(ipath, kMaxIndexBytes));
  absl::StatusOr<Json> parsed =
      ParseStrictJson(index_text, {.max_depth = 4, .max_values = size_t{1} << 22});
  if (!parsed.ok()) return Invalid(ipath, std::string(parsed.status().message()));
  const Json& index = *parsed;
  if (!index.is_object()) return Invalid(ipath, "not a valid JSON object");
  if (!index.contains("weight_map") || !index.at("weight_map").is_object()) {
    return Invalid(ipath, "missing object 'weight_map'");
  }
  std::map<std::string, SafetensorsFile*> shards;
  for (const auto& [name, shard] : index.at("weight_map").items()) {
    if (!shard.is_string())
      return Invalid(ipath, absl::StrCat("weight_map['", name, "'] is not a string"));
    const std::string shard_name = shard.get<std::string>();
    if (shard_name.find('/') != std::string::npos || shard_name == ".." || shard_name.empty()) {
      return Invalid(ipath, absl::StrCat("weight_map['", name, "']: shard name '", shard_name,
                                         "' must be a plain file name"));
    }
    auto it = shards.find(shard_name);
    if (it == shards.end()) {
      ASSIGN_OR_RETURN(SafetensorsFile file,
                       SafetensorsFile::Open((fs::path(dir) / shard_name).string()));
      ckpt.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
      it = shards.emplace(shard_name, ckpt.files_.back().get()).first;
    }
    auto t = it->second->tensors().find(name);
    if (t == it->second->tensors().end()) {
      return Invalid(ipath, absl::StrCat("tensor '", name, "' is not in its shard ", shard_name));
    }
    ckpt.tensors_.emplace(name, t->second);
  }
  // A tensor present in a shard but absent from the index would be silently ignored; refuse it.
  for (const auto& [shard_name, file] : shards) {
    for (const auto& [name, view] : file->tensors()) {
      if (!ckpt.tensors_.count(name)) {
        return Invalid(ipath, absl::StrCat("tensor '", name, "' in ", shard_name,
                                           " is missing from weight_map"));
      }
    }
  }
  return ckpt;
}

}  // namespace yoco
