// Stepping by bytes: a lead byte opens a character, whose possible code points narrow with each
// continuation byte; it is taken only while one of them has a move.
#include "lib/grammar/char_dfa.h"

#include <algorithm>

namespace yoco {
namespace {

// The code points each UTF-8 length may encode (shorter forms would be overlong).
constexpr uint32_t kLeast[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMost[5] = {0, 0x7f, 0x7ff, 0xffff, 0x10ffff};

}  // namespace

int32_t CharDfa::ClassOf(uint32_t cp) const {
  if (cp < 128) return ascii_class_[cp];
  return static_cast<int32_t>(std::upper_bound(class_starts_.begin(), class_starts_.end(), cp) -
                              class_starts_.begin()) -
         1;
}

bool CharDfa::AnyLive(int32_t state, uint32_t lo, uint32_t hi) const {
  const auto& ranges = live_[state];
  auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                             [](const auto& r, uint32_t v) { return r.second < v; });
  return it != ranges.end() && it->first <= hi;
}

bool CharDfa::Step(Cursor* c, uint8_t byte) const {
  int need = c->pending & 0xf;
  int length = c->pending >> 4;
  uint32_t partial = static_cast<uint32_t>(c->partial);
  if (need == 0) {
    if (byte < 0x80) {
      const int32_t next = Next(c->state, byte);
      if (next == kDead) return false;
      *c = {next, 0, 0};
      return true;
    }
    if (byte >= 0xc2 && byte <= 0xdf) {
      length = 2, partial = byte & 0x1f;
    } else if (byte >= 0xe0 && byte <= 0xef) {
      length = 3, partial = byte & 0x0f;
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      length = 4, partial = byte & 0x07;
    } else {
      return false;
    }
    need = length - 1;
  } else {
    if ((byte & 0xc0) != 0x80) return false;
    partial = (partial << 6) | (byte & 0x3f);
    --need;
  }
  // The code points the character can still become.
  const int shift = 6 * need;
  const uint32_t lo = std::max(partial << shift, kLeast[length]);
  const uint32_t hi = std::min(((partial + 1) << shift) - 1, kMost[length]);
  if (lo > hi) return false;
  if (need == 0) {
    if (lo >= 0xd800 && lo <= 0xdfff) return false;  // a surrogate: not UTF-8
    const int32_t next = Next(c->state, lo);
    if (next == kDead) return false;
    *c = {next, 0, 0};
    return true;
  }
  if (!AnyLive(c->state, lo, hi)) return false;  // (live_ holds no surrogates)
  *c = {c->state, need | (length << 4), static_cast<int32_t>(partial)};
  return true;
}

}  // namespace yoco
