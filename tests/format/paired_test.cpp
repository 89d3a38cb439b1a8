// Paired statistics (format/paired.h) against a reference worked by hand on a
// fixed small example (the Wilcoxon rank sums counted, the t quantile from a
// table), and the edge cases a comparison meets: no difference at all, one
// constant difference, one pair.
#include "demandflight/format/paired.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace dfl::format {
namespace {

const std::vector<double> kBaseline = {5.0, 4.0, 6.0, 5.5, 7.0, 4.5};
// Differences -0.5, -1.2, +0.3, -0.8, -2.0, -0.1.
const std::vector<double> kPolicy = {4.5, 2.8, 6.3, 4.7, 5.0, 4.4};

TEST(Paired, MatchesAReferenceWorkedByHand) {
  const Paired p = paired(kPolicy, kBaseline);
  EXPECT_EQ(p.n, 6u);
  EXPECT_NEAR(p.mean, -4.3 / 6, 1e-12);
  // sd of the differences 0.81833..., t(0.975, 5) = 2.570582: mean ± 0.85879.
  EXPECT_NEAR(p.ci_low, -1.575453051187023, 1e-9);
  EXPECT_NEAR(p.ci_high, 0.1421197178536896, 1e-9);
  EXPECT_NEAR(p.p_t, 0.08476022095086301, 1e-9);
  // |d| ranks 1..6, only the 0.3 (rank 2) positive: R+ = 2. Sign patterns
  // with a rank sum <= 2: {}, {1}, {2}; p = 2 x 3/64.
  EXPECT_DOUBLE_EQ(p.p_wilcoxon, 6.0 / 64);
  EXPECT_EQ(p.wins, 5u);
  EXPECT_EQ(p.losses, 1u);
  EXPECT_EQ(p.ties, 0u);
  EXPECT_FALSE(p.significant) << "the interval holds 0";
}

TEST(Paired, ZerosAreDroppedAndTiedRanksShareTheNormalApproximation) {
  // Differences -0.5, -0.5, +0.3, -0.8, -2.0, 0: five left, ranks 1, 2.5,
  // 2.5, 4, 5; R+ = 1; var = 5·6·11/24 - (8-2)/48 = 13.625; z = (1-7.5)/√var.
  const std::vector<double> x = {-0.5, -0.5, 0.3, -0.8, -2.0, 0.0};
  const Paired p = paired(x, std::vector<double>(6, 0.0));
  EXPECT_NEAR(p.p_wilcoxon, 0.0782481864330958, 1e-12);
  EXPECT_EQ(p.ties, 1u);
  EXPECT_EQ(p.wins, 4u);
}

TEST(Paired, NoDifferenceOnAnySeedIsAnIntervalOfZeroWithNoMarker) {
  const Paired p = paired(kBaseline, kBaseline);
  EXPECT_EQ(p.mean, 0);
  EXPECT_EQ(p.ci_low, 0);
  EXPECT_EQ(p.ci_high, 0);
  EXPECT_EQ(p.p_t, 1);
  EXPECT_EQ(p.p_wilcoxon, 1);
  EXPECT_EQ(p.ties, 6u);
  EXPECT_FALSE(p.significant);
}

TEST(Paired, AConstantDifferenceIsItsOwnIntervalAndOnePairHasNone) {
  std::vector<double> shifted = kBaseline;
  for (double& v : shifted)
    v -= 0.25;
  const Paired p = paired(shifted, kBaseline);
  EXPECT_NEAR(p.ci_low, -0.25, 1e-12);
  EXPECT_NEAR(p.ci_high, -0.25, 1e-12);
  EXPECT_TRUE(p.significant);
  EXPECT_EQ(p.wins, 6u);
  const Paired one = paired({1.0}, {2.0});
  EXPECT_TRUE(std::isnan(one.ci_low)) << "one pair has no spread to bound";
  EXPECT_FALSE(one.significant);
  EXPECT_EQ(one.wins, 1u);
  EXPECT_THROW(paired({1.0, 2.0}, {1.0}), std::invalid_argument);
  const double nan = std::nan("");
  const Paired undefined = paired({nan, 1.0, 2.0}, {1.0, 1.5, nan});
  EXPECT_EQ(undefined.n, 1u) << "only the second seed has both";
  EXPECT_EQ(undefined.wins, 1u);
  EXPECT_TRUE(std::isnan(paired({nan}, {nan}).mean));
}

}  // namespace
}  // namespace dfl::format
