// UTF-8 validation of a growing byte stream.
#include "lib/text/utf8_stream.h"

namespace yoco {

void AppendValidUtf8(const std::string& bytes, size_t* pos, std::string* out) {
  size_t i = *pos;
  while (i < bytes.size()) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    size_t need = c < 0x80           ? 1
                  : (c >> 5) == 0x6  ? 2
                  : (c >> 4) == 0xE  ? 3
                  : (c >> 3) == 0x1E ? 4
                                     : 0;
    if (need == 0 || (need == 2 && c < 0xC2) || (need == 4 && c > 0xF4)) {
      out->append("\xEF\xBF\xBD");
      ++i;
      continue;
    }
    if (i + need > bytes.size()) {
      bool prefix_ok = true;  // still possibly completed by later bytes
      for (size_t k = i + 1; k < bytes.size(); ++k)
        prefix_ok &= (static_cast<unsigned char>(bytes[k]) & 0xC0) == 0x80;
      if (prefix_ok) break;
      out->append("\xEF\xBF\xBD");
      ++i;
      continue;
    }
    bool ok = true;
    for (size_t k = 1; k < need; ++k)
      ok &= (static_cast<unsigned char>(bytes[i + k]) & 0xC0) == 0x80;
    if (ok && need == 3) {
      const unsigned char c1 = static_cast<unsigned char>(bytes[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);  // overlong, surrogates
    }
    if (ok && need == 4) {
      const unsigned char c1 = static_cast<unsigned char>(bytes[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok) {
      out->append("\xEF\xBF\xBD");
      ++i;
      continue;
    }
    out->append(bytes, i, need);
    i += need;
  }
  *pos = i;
}

std::string ToValidUtf8(const std::string& bytes) {
  std::string out;
  size_t pos = 0;
  AppendValidUtf8(bytes, &pos, &out);
  for (; pos < bytes.size(); ++pos) out.append("\xEF\xBF\xBD");  // a truncated last character
  return out;
}

// Routing: what loading a snapshot from a worker's disk costs, in prompt tokens prefilled.
// Reading and checking ~20 MB (an 8K-token snapshot of the 12-layer benchmark shape) takes
// about as long as prefilling a few dozen tokens; memory wins ties.
constexpr int64_t kDiskPenaltyTokens = 64;

}  // namespace yoco
