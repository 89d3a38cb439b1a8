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

// Two-sided p-value of the signed-rank statistic from |d| > 0.
double wilcoxon_p(std::vector<double> d) {
  const std::size_t before = d.size();
  d.erase(std::remove(d.begin(), d.end(), 0.0), d.end());
  const bool zeros = d.size() != before;
  const std::size_t n = d.size();
  if (n == 0) return 1.0;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::abs(d[a]) < std::abs(d[b]); });
  // Mean ranks over ties of |d|, and the tie correction sum of (t^3 - t).
  std::vector<double> rank(n);
  double tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && std::abs(d[order[j + 1]]) == std::abs(d[order[i]]))
      ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2;
    for (std::size_t k = i; k <= j; ++k)
      rank[order[k]] = mean_rank;
    const double t = static_cast<double>(j - i + 1);
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j + 1;
  }
  double r_plus = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (d[i] > 0) r_plus += rank[i];
  const double total = static_cast<double>(n) * static_cast<double>(n + 1) / 2;
  const double r_minus = total - r_plus;
  if (!ties && !zeros && n <= 50) {
    // Exact: how many of the 2^n sign patterns give each rank sum (integer
    // ranks 1..n); p = 2 P(R <= min(R+, R-)), at most 1.
    const auto max_sum = static_cast<std::size_t>(total);
    std::vector<double> count(max_sum + 1, 0.0);
    count[0] = 1;
    for (std::size_t r = 1; r <= n; ++r)
      for (std::size_t s = max_sum; s >= r; --s)
        count[s] += count[s - r];
    const auto low = static_cast<std::size_t>(std::min(r_plus, r_minus));
    double tail = 0;
    for (std::size_t s = 0; s <= low; ++s)
      tail += count[s];
    return std::min(1.0, 2 * tail / std::pow(2.0, static_cast<double>(n)));
  }
  const double nn = static_cast<double>(n);
  const double mean = nn * (nn + 1) / 4;
  const double var = nn * (nn + 1) * (2 * nn + 1) / 24 - tie_term / 48;
  if (var <= 0) return 1.0;
  const double z = (std::min(r_plus, r_minus) - mean) / std::sqrt(var);
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
    // No spread: the interval is the value itself.
    out.mean = d[0];
    out.ci_low = out.ci_high = d[0];
    out.p_t = d[0] == 0 ? 1.0 : 0.0;
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
