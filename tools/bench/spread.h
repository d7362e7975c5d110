// Spread: the median and the range of a quantity measured in several rounds, so that a
// benchmark on a shared, noisy machine reports how far one run's ratio can be trusted.
#ifndef YOCO_TOOLS_BENCH_SPREAD_H_
#define YOCO_TOOLS_BENCH_SPREAD_H_

#include <vector>

namespace yoco {

struct Spread {
  double median = 0, min = 0, max = 0;
};

// The median (the mean of the middle two for an even count), smallest and largest of `values`;
// all zero when there are none.
Spread SpreadOf(std::vector<double> values);

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_SPREAD_H_
