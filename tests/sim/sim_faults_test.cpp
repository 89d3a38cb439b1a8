// Each fault kind of the trace format, and determinism.
#include <gtest/gtest.h>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

const std::string kSub =
    R"({"op": "subscribe", "t": 0.0, "demand": "d1", "owner": "a", "artifact": "rock", "priority": 1})"
    "\n";

TEST(SimFaults, ARetryableTransferErrorRetriesAndResumes) {
  const std::string trace =
      header() + artifact("rock", 20'000'000) +
      R"({"op": "fault", "t": 0, "kind": "transfer_error", "artifact": "rock", "count": 2, "after_fraction": 0.25})"
      "\n" +
      kSub;
  const CliRun run = simulate(trace);
  const auto& task = run.result["tasks"][0];
  EXPECT_EQ(task["attempts"], 3);
  EXPECT_EQ(task["outcome"], "installed");
  EXPECT_EQ(demand_record(run.result, "d1")["outcome"], "succeeded");
  // 25% of 20 MB, then 25% of the 15 MB left, then the rest: nothing twice.
  EXPECT_EQ(task["bytes_transferred"], 20'000'000);
}

TEST(SimFaults, APermanentTransferErrorFailsTheDemand) {
  const std::string trace =
      header() + artifact("rock", 20'000'000) +
      R"({"op": "fault", "t": 0, "kind": "transfer_error", "artifact": "rock", "retryable": false})"
      "\n" +
      kSub;
  const CliRun run = simulate(trace);
  EXPECT_EQ(run.result["tasks"][0]["attempts"], 1);
  EXPECT_EQ(run.result["tasks"][0]["outcome"], "failed");
  EXPECT_EQ(demand_record(run.result, "d1")["outcome"], "failed");
}

TEST(SimFaults, ACorruptBodyFailsVerificationAndIsFetchedAgainFromTheStart) {
  const std::string trace = header() + artifact("rock", 20'000'000) +
                            R"({"op": "fault", "t": 0, "kind": "corrupt", "artifact": "rock"})"
                            "\n" +
                            kSub;
  const CliRun run = simulate(trace);
  const auto& task = run.result["tasks"][0];
  EXPECT_EQ(task["attempts"], 2);
  EXPECT_EQ(task["installs"], 1);
  EXPECT_EQ(task["bytes_transferred"], 40'000'000);
  EXPECT_EQ(run.result["summary"]["bytes_wasted"], 20'000'000) << "the corrupt body";
  EXPECT_EQ(demand_record(run.result, "d1")["outcome"], "succeeded");
}

TEST(SimFaults, AnOriginOutageFailsRunningTransfersAndRefusesNewOnes) {
  const std::string trace =
      header(
          R"({"max_transfers": 2, "max_per_origin": 2, "retry": {"max_attempts": 8, "base_s": 0.5, "cap_s": 1.0, "jitter": 0.0}})") +
      artifact("rock", 20'000'000) + kSub +
      R"({"op": "fault", "t": 0.5, "kind": "origin_down", "origin": "cdn", "duration_s": 2.0})"
      "\n";
  const CliRun run = simulate(trace);
  const auto& task = run.result["tasks"][0];
  EXPECT_EQ(task["outcome"], "installed");
  // Failed at 0.5 with 4.5 MB kept; retried at 1.0 and refused after one
  // round trip (0.1 s); retried at 2.1 (backoff 1.0) and refused at 2.2 (back
  // only at 2.5); retried at 3.2 and resumed for the 15.5 MB left.
  EXPECT_EQ(task["attempts"], 4);
  EXPECT_EQ(task["bytes_transferred"], 20'000'000);
  const double t_end = demand_record(run.result, "d1")["t_end"].get<double>();
  EXPECT_NEAR(t_end, 3.2 + 0.05 + 15.5e6 / 10e6, 1e-6);
}

TEST(SimFaults, TheSameInputsGiveTheSameBytes) {
  const std::string trace = read_file(std::string(DFL_SCENARIOS) + "/three_callers.jsonl");
  for (const char* model : {"demand", "callbacks"}) {
    const std::vector<std::string> args = {"sim",     "TRACE", "--out",      "OUT",
                                           "--model", model,   "--timeline", "DIR/timeline.json",
                                           "--quiet"};
    const CliRun a = run_cli(trace, args);
    const CliRun b = run_cli(trace, args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_FALSE(a.result_text.empty());
    EXPECT_EQ(a.result_text, b.result_text) << model;
    const std::string timeline = read_file(a.dir + "/timeline.json");
    EXPECT_FALSE(timeline.empty());
    EXPECT_EQ(timeline, read_file(b.dir + "/timeline.json")) << model;
  }
}

}  // namespace
}  // namespace dfl::testing
