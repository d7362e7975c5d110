// Fixed-width little-endian fields of the cache's file formats (snapshot files, manifests, K/V
// block files), written and read without alignment assumptions. Readers check sizes first.
#ifndef YOCO_LIB_CACHE_FILE_FIELDS_H_
#define YOCO_LIB_CACHE_FILE_FIELDS_H_

#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace yoco {

template <typename T>
void PutField(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// REQUIRES: *pos + sizeof(T) <= in.size().
template <typename T>
T GetField(absl::string_view in, size_t* pos) {
  T v;
  std::memcpy(&v, in.data() + *pos, sizeof v);
  *pos += sizeof v;
  return v;
}

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_FILE_FIELDS_H_
