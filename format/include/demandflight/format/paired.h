// Paired statistics: a policy against a baseline, seed by seed.
//
// `demandflight compare --baseline POLICY` (and Python's dfl.compare) pairs
// each run with the baseline's run on the same trace, model and seed, and
// summarises the differences d_i = x_i - baseline_i (for the score, lower is
// better, so a negative difference is a win):
//
//   mean       the mean difference;
//   ci_low/hi  its 95% confidence interval by Student's t with n-1 degrees
//              of freedom (mean ± t(0.975, n-1) · sd / √n); NaN (and p_t
//              NaN) with fewer than two pairs, and when every difference is
//              the same (`constant`: the replications did not vary, and an
//              interval would claim a certainty they cannot give);
//   p_t        the two-sided p-value of the paired t-test;
//   p_wilcoxon the two-sided p-value of the Wilcoxon signed-rank test
//              (zero differences dropped, tied |d| given their mean rank);
//              exact for n <= kWilcoxonExactMax non-zero differences: the
//              rank sum's distribution over the 2^n sign patterns of these
//              very ranks, ties included (so no p is below the smallest the
//              test can give: 2/2^n); above, the normal approximation with
//              the tie correction and no continuity correction; 1 when no
//              difference is non-zero. scipy.stats.wilcoxon (1.10, its
//              defaults) gives the same values where no |d| ties and no d
//              is 0 (with ties its "exact" ignores them; with zeros it
//              switches to the approximation);
//   wins/losses/ties  pairs where d < 0, d > 0, d = 0;
//   significant       the interval excludes 0 (never for `constant`).
#pragma once

#include <cstddef>
#include <vector>

namespace dfl::format {

inline constexpr std::size_t kWilcoxonExactMax = 50;

struct Paired {
  std::size_t n = 0;
  bool constant = false;  // Every difference the same (n >= 2): no interval.
  double mean = 0, ci_low = 0, ci_high = 0;
  double p_t = 1, p_wilcoxon = 1;
  std::size_t wins = 0, losses = 0, ties = 0;
  bool significant = false;
};

// `x` and `baseline` pair by index; they must have the same length
// (std::invalid_argument otherwise). A pair with a NaN on either side (a
// figure undefined on that seed) is left out; none left: every figure NaN.
Paired paired(const std::vector<double>& x, const std::vector<double>& baseline);

}  // namespace dfl::format
