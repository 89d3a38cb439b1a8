// The contracts of design.md §3, end to end: a trace in, a result out, the
// engine driven by SimGrid.
#include <gtest/gtest.h>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

std::string sub(double t, const std::string& demand, const std::string& owner,
                const std::string& artifact_id, int priority, const std::string& extra = "") {
  return R"({"op": "subscribe", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand +
         R"(", "owner": ")" + owner + R"(", "artifact": ")" + artifact_id + R"(", "priority": )" +
         std::to_string(priority) + extra + "}\n";
}
std::string cancel(double t, const std::string& demand) {
  return R"({"op": "cancel", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand + "\"}\n";
}

TEST(SimContracts, Contract1_OneArtifactKeyHasAtMostOneLivePhysicalTask) {
  // Two aliases of one key, as two subsystems may name one artifact.
  const std::string trace = header() + artifact("rock", 20'000'000, "props/rock") +
                            artifact("rock-alias", 20'000'000, "props/rock") +
                            sub(0, "d1", "a", "rock", 0) + sub(0.5, "d2", "b", "rock-alias", 3) +
                            sub(1.0, "d3", "c", "rock", 1);
  const CliRun run = simulate(trace);
  EXPECT_EQ(run.result["summary"]["transfers_started"], 1);
  EXPECT_EQ(run.result["summary"]["installs"], 1);
  EXPECT_EQ(run.result["tasks"].size(), 1u);
  EXPECT_EQ(run.result["summary"]["outcomes"]["succeeded"], 3);
}

TEST(SimContracts, Contract2_CancellingOneDemandLeavesOthersRunning) {
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "d1", "a", "rock", 0) +
                            sub(0, "d2", "b", "rock", 3) + cancel(0.5, "d2");
  const CliRun run = simulate(trace);
  EXPECT_EQ(demand_record(run.result, "d2")["outcome"], "cancelled");
  EXPECT_DOUBLE_EQ(demand_record(run.result, "d2")["t_end"].get<double>(), 0.5);
  EXPECT_EQ(demand_record(run.result, "d1")["outcome"], "succeeded");
  EXPECT_EQ(run.result["summary"]["bytes_wasted"], 0);
  EXPECT_EQ(run.result["summary"]["transfers_started"], 1);
}

TEST(SimContracts, Contract3_CancellingTopPriorityDemandLowersTheTask) {
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "d1", "a", "rock", 0) +
                            sub(0.5, "d2", "b", "rock", 3) + cancel(1.0, "d2");
  const CliRun run = simulate(trace);
  const auto& timeline = run.result["tasks"][0]["priority_timeline"];
  ASSERT_GE(timeline.size(), 3u) << timeline.dump();
  EXPECT_EQ(timeline[0], nlohmann::json::parse("[0.0, 0]"));
  EXPECT_EQ(timeline[1], nlohmann::json::parse("[0.5, 3]"));
  EXPECT_EQ(timeline[2], nlohmann::json::parse("[1.0, 0]"));
  EXPECT_EQ(run.result["summary"]["priority_pollution_s"], 0.0);
}

TEST(SimContracts, Contract4_RetryAndInstallOncePerOutcome_ExactlyOneTerminalEach) {
  const std::string trace =
      header() + artifact("rock", 20'000'000) +
      R"({"op": "fault", "t": 0, "kind": "transfer_error", "artifact": "rock", "after_fraction": 0.5})"
      "\n" +
      sub(0, "d1", "a", "rock", 0) + sub(0.1, "d2", "b", "rock", 2);
  const CliRun run = simulate(trace);
  ASSERT_EQ(run.result["tasks"].size(), 1u);
  const auto& task = run.result["tasks"][0];
  EXPECT_EQ(task["attempts"], 2);
  EXPECT_EQ(task["installs"], 1);
  EXPECT_EQ(task["bytes_transferred"], 20'000'000) << "the retry resumed: no byte fetched twice";
  for (const char* d : {"d1", "d2"})
    EXPECT_EQ(demand_record(run.result, d)["outcome"], "succeeded");
}

TEST(SimContracts, Contract5_AnEndedDemandIsNeverDeliveredSuccess) {
  const std::string trace =
      header() + artifact("rock", 20'000'000) +
      R"({"op": "end_owner", "t": 0, "owner": "stale", "owner_generation": 1})"
      "\n" +
      sub(0, "keeper", "a", "rock", 0) + sub(0, "cancelled", "b", "rock", 0) +
      sub(0, "timed", "c", "rock", 0, R"(, "timeout_s": 1.0)") + sub(0, "owned", "d", "rock", 0) +
      sub(0, "stale", "stale", "rock", 0, R"(, "owner_generation": 1)") + cancel(0.5, "cancelled") +
      R"({"op": "end_owner", "t": 0.7, "owner": "d"})"
      "\n";
  const CliRun run = simulate(trace);
  EXPECT_EQ(demand_record(run.result, "keeper")["outcome"], "succeeded");
  EXPECT_EQ(demand_record(run.result, "cancelled")["outcome"], "cancelled");
  EXPECT_EQ(demand_record(run.result, "timed")["outcome"], "timed_out");
  EXPECT_EQ(demand_record(run.result, "owned")["outcome"], "owner_ended");
  EXPECT_EQ(demand_record(run.result, "stale")["outcome"], "owner_ended");
  EXPECT_EQ(run.result["summary"]["installs"], 1);
}

TEST(SimContracts, ACompletedOrphanIsWastedUnlessSomeoneUsesIt) {
  const std::string base =
      header() + artifact("rock", 20'000'000) + sub(0, "d1", "a", "rock", 0) + cancel(0.5, "d1");
  const CliRun unused = simulate(base, {"--policy", "always-complete"});
  EXPECT_EQ(unused.result["tasks"][0]["outcome"], "installed");
  EXPECT_EQ(unused.result["summary"]["bytes_wasted"], 20'000'000);
  const CliRun used =
      simulate(base + sub(5, "d2", "b", "rock", 1), {"--policy", "always-complete"});
  EXPECT_EQ(used.result["summary"]["bytes_wasted"], 0);
  EXPECT_EQ(used.result["summary"]["cache_hits"], 1);
  const CliRun aborted = simulate(base);
  EXPECT_EQ(aborted.result["tasks"][0]["outcome"], "aborted");
  EXPECT_EQ(aborted.result["summary"]["bytes_wasted"], 4'500'000)
      << "(0.5 s - 0.05 s latency) at 10 MB/s, received then thrown away";
}

}  // namespace
}  // namespace dfl::testing
