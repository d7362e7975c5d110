// SpreadOf against values whose median and range are known by construction.
#include "tools/bench/spread.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

TEST(SpreadTest, OddCountTakesTheMiddleValueWhateverTheOrder) {
  const Spread s = SpreadOf({5.0, 1.0, 4.0, 2.0, 3.0});
  EXPECT_EQ(s.median, 3.0);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 5.0);
}

TEST(SpreadTest, EvenCountTakesTheMeanOfTheMiddleTwo) {
  const Spread s = SpreadOf({10.0, 2.0, 4.0, 7.0});
  EXPECT_EQ(s.median, 5.5);
  EXPECT_EQ(s.min, 2.0);
  EXPECT_EQ(s.max, 10.0);
}

TEST(SpreadTest, OneValueIsItsOwnMedianAndRange) {
  const Spread s = SpreadOf({0.75});
  EXPECT_EQ(s.median, 0.75);
  EXPECT_EQ(s.min, 0.75);
  EXPECT_EQ(s.max, 0.75);
}

TEST(SpreadTest, NoValuesGiveZeros) {
  const Spread s = SpreadOf({});
  EXPECT_EQ(s.median, 0.0);
  EXPECT_EQ(s.min, 0.0);
  EXPECT_EQ(s.max, 0.0);
}

}  // namespace
}  // namespace yoco
