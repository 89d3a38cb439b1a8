// Background throttling in the simulator (docs/design.md, *Background
// throttling*): the same rule as the backend's, on the client's links. Under
// cm02 a lone transfer takes size / bandwidth + latency, so the times below
// are worked out by hand: client 10 MB/s, origin 40 MB/s, 50 ms one way.
#include <gtest/gtest.h>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

const std::string kCapped =
    R"({"max_transfers": 2, "max_per_origin": 2, "throttle": {"background_at_or_below": 0, "background_Bps": 1000000}})";

std::string sub(double t, const std::string& demand, const std::string& artifact, int priority) {
  return R"({"op": "subscribe", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand +
         R"(", "owner": "o", "artifact": ")" + artifact + R"(", "priority": )" +
         std::to_string(priority) + "}\n";
}

double end_of(const CliRun& run, const std::string& demand) {
  EXPECT_EQ(demand_record(run.result, demand)["outcome"], "succeeded") << demand;
  return demand_record(run.result, demand)["t_end"].get<double>();
}

// A prefetch (p0, 20 MB) from t=0, a critical load (p3, 5 MB) at t=0.5.
std::string prefetch_and_critical(const std::string& scheduler) {
  return header(scheduler) + artifact("prefetch", 20'000'000) + artifact("critical", 5'000'000) +
         sub(0, "p", "prefetch", 0) + sub(0.5, "c", "critical", 3);
}

TEST(SimThrottle, WhileACriticalDemandWaitsThePrefetchRunsAtTheCap) {
  const CliRun capped = simulate(prefetch_and_critical(kCapped));
  const CliRun free = simulate(prefetch_and_critical(R"({"max_transfers": 2, "max_per_origin": 2})"));
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  ASSERT_EQ(free.exit_code, 0) << free.err;
  // Capped, the critical load has 9 of the client's 10 MB/s: 5 MB in 0.56 s;
  // shared fairly, 5 MB/s: 1 s.
  const double critical_capped = end_of(capped, "c") - 0.5;
  const double critical_free = end_of(free, "c") - 0.5;
  EXPECT_NEAR(critical_capped, 5.0 / 9 + 0.05, 0.05);
  EXPECT_NEAR(critical_free, 1.0 + 0.05, 0.05);
  // The prefetch got 1 MB/s meanwhile, then the whole link again: the link
  // was busy all along, so it ends at about the same time either way.
  EXPECT_NEAR(end_of(capped, "p"), end_of(free, "p"), 0.1);
  EXPECT_NEAR(end_of(capped, "p"), 25.0 / 10 + 0.1, 0.1);
}

TEST(SimThrottle, WithNothingAboveTheLevelWaitingTheBackgroundIsNotCapped) {
  const CliRun run = simulate(header(kCapped) + artifact("prefetch", 20'000'000) +
                              sub(0, "p", "prefetch", 0));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NEAR(end_of(run, "p"), 2.0 + 0.05, 0.05);
}

TEST(SimThrottle, TheOverallCapHoldsEveryTransferUntilAThrottleRecordLiftsIt) {
  const std::string trace =
      header(R"({"max_transfers": 2, "max_per_origin": 2, "throttle": {"overall_Bps": 2000000}})") +
      artifact("a", 10'000'000) + artifact("b", 10'000'000) + sub(0, "da", "a", 3) +
      sub(0, "db", "b", 3) + R"({"op": "throttle", "t": 5.0})" "\n";
  const CliRun run = simulate(trace);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // 2 MB/s together for 5 s (10 MB of 20), then 10 MB/s: the rest in 1 s.
  EXPECT_NEAR(end_of(run, "da"), 6.0 + 0.05, 0.1);
  EXPECT_NEAR(end_of(run, "db"), 6.0 + 0.05, 0.1);
}

TEST(SimThrottle, ATransferRaisedAboveTheLevelLeavesTheCapMidWay) {
  const std::string raise = R"({"op": "set_priority", "t": 0.7, "demand": "p", "priority": 3})" "\n";
  const CliRun raised = simulate(prefetch_and_critical(kCapped) + raise);
  const CliRun capped = simulate(prefetch_and_critical(kCapped));
  ASSERT_EQ(raised.exit_code, 0) << raised.err;
  // Raised at 0.7 s, the prefetch shares the link fairly with the critical load
  // from then on: the critical one ends later than when it had 9 MB/s.
  EXPECT_GT(end_of(raised, "c"), end_of(capped, "c") + 0.1);
  // Nothing is lost by moving the transfer: every byte once.
  EXPECT_EQ(raised.result["summary"]["bytes_transferred"], 25'000'000);
}

TEST(SimThrottle, BadThrottleFieldsAreRefusedWithLineAndField) {
  const CliRun run = run_cli(
      header(R"({"throttle": {"background_Bps": 1000}})") + artifact("a", 10),
      {"validate", "TRACE"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(":1: scheduler.throttle.background_Bps: needs background_at_or_below"),
            std::string::npos)
      << run.err;
  const CliRun record = run_cli(header() + artifact("a", 10) +
                                    R"({"op": "throttle", "t": 1, "overall_Bps": -5})" "\n",
                                {"validate", "TRACE"});
  EXPECT_EQ(record.exit_code, 2);
  EXPECT_NE(record.err.find(":3: overall_Bps: must not be negative"), std::string::npos)
      << record.err;
}

TEST(SimThrottle, TheNs3ModelRefusesThrottlingByName) {
  const CliRun run = run_cli(prefetch_and_critical(kCapped),
                             {"sim", "TRACE", "--network-model", "ns3", "--quiet"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("throttling is not modelled under the ns3 network model"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace dfl::testing
