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

// A streamed run's percentiles (LatencySpill: radix selection over a file)
// are the very values the in-memory selection gives, whatever the values'
// spread: small thresholds force every pass, down to all 64 bits (ties),
// and the values include zeros, tiny and huge numbers, and many priorities
// (more than one batch of ranks).
TEST(Latencies, ASpillFileGivesExactlyWhatMemoryGives) {
  const std::uint64_t seed =
      dfl::testing::random_test_seed("Latencies.ASpillFileGivesExactlyWhatMemoryGives");
  std::mt19937_64 random(seed);
  for (int round = 0; round < 30; ++round) {
    const std::size_t n = round == 0 ? 0 : 1 + random() % 20000;
    const int priorities = 1 + static_cast<int>(random() % (round % 5 == 0 ? 40 : 4));
    const std::uint64_t collect = round % 3 == 0 ? 1 : round % 3 == 1 ? 64 : 1u << 22;
    LatencySpill spill(collect);
    std::vector<double> all;
    std::map<Priority, std::vector<double>> by_priority;
    for (std::size_t i = 0; i < n; ++i) {
      const auto priority = static_cast<Priority>(random() % static_cast<unsigned>(priorities)) - 2;
      double v = 0;
      switch (random() % 5) {
        case 0: v = static_cast<double>(random() % 8) / 4; break;  // Ties, zero.
        case 1: v = std::ldexp(static_cast<double>(random() % 1000), -40); break;  // Tiny.
        case 2: v = std::ldexp(static_cast<double>(random() % 1000), 30); break;   // Huge.
        default: v = static_cast<double>(random()) / 1e15; break;
      }
      spill.add(priority, v);
      all.push_back(v);
      by_priority[priority].push_back(v);
    }
    Summary summary;
    spill.finish(summary);
    EXPECT_EQ(spill.size(), n);
    expect_same(summary.latency_s, sorted_reference(all), "overall", seed);
    ASSERT_EQ(summary.latency_s_by_priority.size(), by_priority.size()) << "seed " << seed;
    for (const auto& [priority, values] : by_priority) {
      expect_same(summary.latency_s_by_priority.at(priority), sorted_reference(values),
                  "by priority", seed);
    }
  }
}

}  // namespace
}  // namespace dfl::format
