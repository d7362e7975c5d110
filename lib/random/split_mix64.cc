// SplitMix64 (Steele, Lea, Flood 2014): a Weyl sequence through a 64-bit mixer.
#include "lib/random/split_mix64.h"

namespace yoco {

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix64::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

uint64_t SplitMix64::Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

}  // namespace yoco
