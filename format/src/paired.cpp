#include "demandflight/format/paired.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace dfl::format {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Two-sided p-value of the signed-rank statistic (paired.h).
double wilcoxon_p(std::vector<double> d) {
  d.erase(std::remove(d.begin(), d.end(), 0.0), d.end());
  const std::size_t n = d.size();
  if (n == 0) return 1.0;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::abs(d[a]) < std::abs(d[b]); });
  // Twice the mean rank over ties of |d| (an integer), and the tie
  // correction sum of (t^3 - t).
  std::vector<std::size_t> rank2(n);
  double tie_term = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && std::abs(d[order[j + 1]]) == std::abs(d[order[i]]))
      ++j;
    for (std::size_t k = i; k <= j; ++k)
      rank2[order[k]] = (i + 1) + (j + 1);
    const double t = static_cast<double>(j - i + 1);
    tie_term += t * t * t - t;
    i = j + 1;
  }
  std::size_t r2_plus = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (d[i] > 0) r2_plus += rank2[i];
  const std::size_t total2 = n * (n + 1);  // Twice the sum of the ranks.
  const std::size_t low2 = std::min(r2_plus, total2 - r2_plus);
  if (n <= kWilcoxonExactMax) {
    // Exact: how many of the 2^n sign patterns give each (doubled) rank sum
    // with these ranks, tied ones included; p = 2 P(R <= min(R+, R-)), at most 1.
    std::vector<double> count(total2 + 1, 0.0);
    count[0] = 1;
    for (std::size_t r : rank2)
      for (std::size_t s = total2; s >= r; --s)
        count[s] += count[s - r];
    double tail = 0;
    for (std::size_t s = 0; s <= low2; ++s)
      tail += count[s];
    return std::min(1.0, 2 * tail / std::pow(2.0, static_cast<double>(n)));
  }
  const double nn = static_cast<double>(n);
  const double mean = nn * (nn + 1) / 4;
  const double var = nn * (nn + 1) * (2 * nn + 1) / 24 - tie_term / 48;
  if (var <= 0) return 1.0;
  const double z = (static_cast<double>(low2) / 2 - mean) / std::sqrt(var);
  return std::min(1.0, 2 * boost::math::cdf(boost::math::normal(), z));
}

}  // namespace

Paired paired(const std::vector<double>& x, const std::vector<double>& baseline) {
  if (x.size() != baseline.size()) {
    throw std::invalid_argument("paired: " + std::to_string(x.size()) + " values against " +
                                std::to_string(baseline.size()) + " of the baseline");
  }
  Paired out;
  std::vector<double> d;
  for (std::size_t i = 0; i < x.size(); ++i) {
    // A figure undefined on a seed (NaN: no demand of the class succeeded)
    // pairs with nothing there.
    if (std::isnan(x[i]) || std::isnan(baseline[i])) continue;
    d.push_back(x[i] - baseline[i]);
    if (d.back() < 0) ++out.wins;
    if (d.back() > 0) ++out.losses;
    if (d.back() == 0) ++out.ties;
  }
  out.n = d.size();
  if (out.n == 0) {
    out.mean = out.ci_low = out.ci_high = out.p_t = out.p_wilcoxon = kNaN;
    return out;
  }
  out.mean = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(out.n);
  const bool all_equal = std::all_of(d.begin(), d.end(), [&](double v) { return v == d[0]; });
  if (out.n < 2) {
    // One pair says nothing about the spread.
    out.ci_low = out.ci_high = kNaN;
    out.p_t = kNaN;
  } else if (all_equal) {
    // No spread: the replications did not differ, and a t interval would
    // claim a certainty they cannot give. None, and no marker.
    out.mean = d[0];
    out.constant = true;
    out.ci_low = out.ci_high = kNaN;
    out.p_t = kNaN;
  } else {
    double ss = 0;
    for (double v : d)
      ss += (v - out.mean) * (v - out.mean);
    const double nn = static_cast<double>(out.n);
    const double se = std::sqrt(ss / (nn - 1)) / std::sqrt(nn);
    if (!std::isfinite(se) || !std::isfinite(out.mean) || se <= 0) {
      out.ci_low = out.ci_high = out.p_t = kNaN;  // Infinite figures: no interval.
      out.p_wilcoxon = wilcoxon_p(d);
      return out;
    }
    const boost::math::students_t t(nn - 1);
    const double q = boost::math::quantile(t, 0.975);
    out.ci_low = out.mean - q * se;
    out.ci_high = out.mean + q * se;
    out.p_t = 2 * boost::math::cdf(boost::math::complement(t, std::abs(out.mean) / se));
  }
  out.p_wilcoxon = wilcoxon_p(d);
  out.significant = !std::isnan(out.ci_low) && (out.ci_low > 0 || out.ci_high < 0);
  return out;
}

}  // namespace dfl::format
