// Latency percentiles (docs/design.md §3 results: latency_s over succeeded demands,
// nearest rank, overall and by priority) against a plain reference that sorts
// each group, on random demands with ties, several priorities interleaved,
// failures and unended demands mixed in. DFL_SEED replays a failure; the seed
// is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>

#include "demandflight/format/result.h"
#include "random_test_seed.h"

namespace dfl::format {
namespace {

Percentiles sorted_reference(std::vector<double> values) {
  Percentiles out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n)));
    return values[std::min(rank, values.size()) - 1];
  };
  out.p50 = at(0.50);
  out.p95 = at(0.95);
  out.p99 = at(0.99);
  return out;
}

void expect_same(const Percentiles& got, const Percentiles& want, const char* what,
                 std::uint64_t seed) {
  EXPECT_EQ(got.p50, want.p50) << what << ", seed " << seed;
  EXPECT_EQ(got.p95, want.p95) << what << ", seed " << seed;
  EXPECT_EQ(got.p99, want.p99) << what << ", seed " << seed;
}

TEST(Latencies, MatchASortedReferenceOverallAndByPriority) {
  const std::uint64_t seed =
      dfl::testing::random_test_seed("Latencies.MatchASortedReferenceOverallAndByPriority");
  std::mt19937_64 random(seed);
  for (int round = 0; round < 40; ++round) {
    Result result;
    const std::size_t demands = random() % 3 == 0 ? random() % 5 : random() % 3000;
    const Priority priorities = 1 + static_cast<Priority>(random() % 5);
    std::vector<double> all;
    std::map<Priority, std::vector<double>> by_priority;
    for (std::size_t i = 0; i < demands; ++i) {
      DemandResult d;
      d.priority = static_cast<Priority>(random() % priorities) - 1;  // -1 too.
      // Runs of one priority now and then, as a trace's phases give.
      if (i > 0 && random() % 4 == 0) d.priority = result.demands.back().priority;
      d.t_subscribe = static_cast<double>(random() % 1000) / 8;
      d.t_end = d.t_subscribe + static_cast<double>(random() % 50) / 4;  // Ties.
      d.ended = random() % 10 != 0;
      d.outcome = random() % 4 == 0 ? DemandOutcome::failed : DemandOutcome::succeeded;
      if (d.ended && d.outcome == DemandOutcome::succeeded) {
        all.push_back(d.t_end - d.t_subscribe);
        by_priority[d.priority].push_back(d.t_end - d.t_subscribe);
      }
      result.demands.push_back(d);
    }
    Result scratch_run = result;
    compute_latencies(result);
    std::vector<double> scratch(result.demands.size() + 1, -1.0);
    compute_latencies(scratch_run, scratch.data());

    for (const Result* r : {&result, &scratch_run}) {
      expect_same(r->summary.latency_s, sorted_reference(all), "overall", seed);
      ASSERT_EQ(r->summary.latency_s_by_priority.size(), by_priority.size()) << "seed " << seed;
      for (const auto& [priority, values] : by_priority) {
        ASSERT_TRUE(r->summary.latency_s_by_priority.count(priority)) << "seed " << seed;
        expect_same(r->summary.latency_s_by_priority.at(priority), sorted_reference(values),
                    "by priority", seed);
      }
    }
  }
}

}  // namespace
}  // namespace dfl::format
