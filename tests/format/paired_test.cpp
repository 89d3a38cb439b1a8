// Paired statistics (format/paired.h) against a reference worked by hand on a
// fixed small example (the Wilcoxon rank sums counted, the t quantile from a
// table), and the edge cases a comparison meets: no difference at all, one
// constant difference, one pair.
#include "demandflight/format/paired.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "random_test_seed.h"

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

TEST(Paired, ZerosAreDroppedAndTiedRanksCountExactly) {
  // Differences -0.5, -0.5, +0.3, -0.8, -2.0, 0: five left, ranks 1 (0.3),
  // 2.5, 2.5, 4, 5; R+ = 1. Of the 32 sign patterns of these ranks, those
  // with a rank sum <= 1: {} and {1}; p = 2 x 2/32.
  const std::vector<double> x = {-0.5, -0.5, 0.3, -0.8, -2.0, 0.0};
  const Paired p = paired(x, std::vector<double>(6, 0.0));
  EXPECT_DOUBLE_EQ(p.p_wilcoxon, 4.0 / 32);
  EXPECT_EQ(p.ties, 1u);
  EXPECT_EQ(p.wins, 4u);
}

TEST(Paired, NoDifferenceOnAnySeedHasNoIntervalAndNoMarker) {
  const Paired p = paired(kBaseline, kBaseline);
  EXPECT_EQ(p.mean, 0);
  EXPECT_TRUE(p.constant);
  EXPECT_TRUE(std::isnan(p.ci_low));
  EXPECT_TRUE(std::isnan(p.p_t));
  EXPECT_EQ(p.p_wilcoxon, 1);
  EXPECT_EQ(p.ties, 6u);
  EXPECT_FALSE(p.significant);
}

TEST(Paired, AConstantDifferenceHasNoIntervalNorMarkerAndOnePairHasNone) {
  // Five seeds that all gave the same run but for a constant shift: the
  // replications did not vary, so nothing is significant, and the
  // signed-rank p is the least the test can give with 5 pairs, 2/32.
  const std::vector<double> base = {5.0, 5.0, 5.0, 5.0, 5.0};
  const std::vector<double> shifted(5, 5.0 + 3.18e-4);
  const Paired p = paired(shifted, base);
  EXPECT_TRUE(p.constant);
  EXPECT_NEAR(p.mean, 3.18e-4, 1e-12);
  EXPECT_TRUE(std::isnan(p.ci_low));
  EXPECT_TRUE(std::isnan(p.ci_high));
  EXPECT_FALSE(p.significant);
  EXPECT_DOUBLE_EQ(p.p_wilcoxon, 2.0 / 32) << "scipy.stats.wilcoxon gives 0.0625";
  EXPECT_EQ(p.losses, 5u);
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

// The exact p against brute force: every one of the 2^n sign patterns of
// the same |d| (ties and zeros included) summed up, for n = 1..16.
TEST(Paired, TheExactSignedRankPMatchesEnumeratingEverySignPattern) {
  std::mt19937_64 rng(dfl::testing::random_test_seed("Paired.exact"));
  for (std::size_t n = 1; n <= 16; ++n) {
    for (int round = 0; round < 20; ++round) {
      // Small integers: ties and zeros are common.
      std::uniform_int_distribution<int> pick(-4, 4);
      std::vector<double> d(n);
      for (double& v : d)
        v = pick(rng);
      const Paired p = paired(d, std::vector<double>(n, 0.0));
      std::vector<double> nz;
      for (double v : d)
        if (v != 0) nz.push_back(v);
      if (nz.empty()) {
        EXPECT_EQ(p.p_wilcoxon, 1);
        continue;
      }
      // Mid-ranks of |d| by counting.
      const std::size_t m = nz.size();
      std::vector<double> rank(m);
      for (std::size_t i = 0; i < m; ++i) {
        double below = 0, equal = 0;
        for (double w : nz) {
          below += std::abs(w) < std::abs(nz[i]);
          equal += std::abs(w) == std::abs(nz[i]);
        }
        rank[i] = below + (equal + 1) / 2;
      }
      double r_plus = 0, total = 0;
      for (std::size_t i = 0; i < m; ++i) {
        total += rank[i];
        if (nz[i] > 0) r_plus += rank[i];
      }
      const double t = std::min(r_plus, total - r_plus);
      double at_most = 0;
      for (std::uint32_t mask = 0; mask < (1u << m); ++mask) {
        double sum = 0;
        for (std::size_t i = 0; i < m; ++i)
          if (mask & (1u << i)) sum += rank[i];
        at_most += sum <= t + 1e-9;
      }
      const double expected = std::min(1.0, 2 * at_most / static_cast<double>(1u << m));
      EXPECT_NEAR(p.p_wilcoxon, expected, 1e-12) << "n=" << n << " round " << round;
      EXPECT_GE(p.p_wilcoxon, 2.0 / static_cast<double>(1u << m) - 1e-15);
    }
  }
}

// scipy.stats.wilcoxon(d) (1.10.1, exact) for n = 1..25 without ties or
// zeros: d_i = (-1)^(i mod 3) * i for i = 1..n, so each n has its own R+.
TEST(Paired, TheExactSignedRankPMatchesScipyWithoutTies) {
  const double scipy[26] = {0,
      1.0, 0.5, 1.0, 0.625,
      0.3125, 0.84375, 0.46875, 0.25,
      0.65234375, 0.375, 0.2060546875, 0.5185546875,
      0.305419921875, 0.172607421875, 0.42120361328125, 0.252227783203125,
      0.1454315185546875, 0.34654998779296875, 0.21011734008789062, 0.1230926513671875,
      0.2877340316772461, 0.1761918067932129, 0.10454297065734863, 0.2405325174331665,
      0.14847958087921143};
  for (std::size_t n = 1; n <= 25; ++n) {
    std::vector<double> d(n);
    for (std::size_t i = 1; i <= n; ++i)
      d[i - 1] = (i % 3 == 0 ? -1.0 : 1.0) * static_cast<double>(i);
    EXPECT_NEAR(paired(d, std::vector<double>(n, 0.0)).p_wilcoxon, scipy[n], 1e-12) << n;
  }
}

}  // namespace
}  // namespace dfl::format
