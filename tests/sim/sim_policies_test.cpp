// Orphan policies in the simulator: they decide on what a transfer has really
// received at the instant its last demand leaves (the engine asks the
// simulator, which knows it exactly).
#include <gtest/gtest.h>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

// One 1 MB transfer over the 10 MB/s, 50 ms bottleneck of header(): its
// bytes arrive from 0.05 s to 0.15 s. Its only demand leaves at `cancel_t`.
nlohmann::json run_cancelled_at(double cancel_t, const std::string& policy) {
  const std::string trace =
      header() + artifact("rock", 1'000'000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})" +
      "\n" + R"({"op": "cancel", "t": )" + std::to_string(cancel_t) + R"(, "demand": "d1"})" + "\n";
  return simulate(trace, {"--policy", policy}).result;
}

TEST(SimPolicies, SquidFinishesATransferThatIsNearlyInAndAbortsOneThatIsNot) {
  const std::string squid = "squid:min_bytes=0,max_bytes=10000000,pct=90";
  const auto nearly = run_cancelled_at(0.145, squid);  // ~95% in.
  EXPECT_EQ(nearly["tasks"][0]["outcome"], "installed");
  EXPECT_EQ(nearly["summary"]["installs"], 1);
  const auto early = run_cancelled_at(0.06, squid);  // ~10% in.
  EXPECT_EQ(early["tasks"][0]["outcome"], "aborted");
  EXPECT_NEAR(early["summary"]["bytes_wasted"].get<double>(), 100'000, 1'000)
      << "what had arrived when it was aborted";
}

TEST(SimPolicies, LowPriorityCompletesWhenNobodyWaitsForTheSlot) {
  const auto run = run_cancelled_at(0.06, "low-priority");
  EXPECT_EQ(run["tasks"][0]["outcome"], "installed");
  EXPECT_EQ(run["demands"][0]["outcome"], "cancelled") << "the demand still ended cancelled";
}

// rock's only demand leaves at 0.10 s (about half of it in), and a new
// demand asks for it again at 1 s when `again`.
nlohmann::json run_left_and_asked_again(const std::string& policy, bool again) {
  std::string trace =
      header() + artifact("rock", 1'000'000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})" +
      "\n" + R"({"op": "cancel", "t": 0.1, "demand": "d1"})" + "\n";
  if (again) {
    trace += R"({"op": "subscribe", "t": 1, "demand": "d2", "owner": "o", "artifact": "rock", "priority": 1})";
    trace += "\n";
  }
  return simulate(trace, {"--policy", policy}).result;
}

TEST(SimPolicies, KeepPartialResumesFromTheKeptOffsetAndThoseBytesAreNotTransferredAgain) {
  const auto abort = run_left_and_asked_again("always-abort", true);
  const auto keep = run_left_and_asked_again("keep-partial", true);
  ASSERT_EQ(keep["tasks"].size(), 2u);
  EXPECT_EQ(keep["tasks"][0]["outcome"], "aborted");
  EXPECT_EQ(keep["tasks"][1]["outcome"], "installed");
  EXPECT_EQ(keep["demands"][1]["outcome"], "succeeded");
  const auto first = keep["tasks"][0]["bytes_transferred"].get<double>();
  const auto second = keep["tasks"][1]["bytes_transferred"].get<double>();
  EXPECT_NEAR(first, 500'000, 5'000) << "half had arrived at 0.10 s";
  EXPECT_EQ(first + second, 1'000'000) << "the second task fetched only the rest";
  EXPECT_EQ(keep["summary"]["bytes_transferred"], 1'000'000);
  EXPECT_EQ(keep["summary"]["bytes_wasted"], 0) << "the kept bytes were used";
  // always-abort fetches the first half twice and wastes it once.
  EXPECT_EQ(abort["tasks"][1]["bytes_transferred"], 1'000'000);
  EXPECT_NEAR(abort["summary"]["bytes_wasted"].get<double>(), first, 1);
  // The resumed transfer is shorter: d2 is served sooner.
  EXPECT_LT(keep["demands"][1]["t_end"].get<double>(), abort["demands"][1]["t_end"].get<double>());
}

TEST(SimPolicies, AKeptPartialThatIsNeverResumedIsWasted) {
  const auto keep = run_left_and_asked_again("keep-partial", false);
  EXPECT_NEAR(keep["summary"]["bytes_wasted"].get<double>(),
              keep["tasks"][0]["bytes_transferred"].get<double>(), 1);
  EXPECT_GT(keep["summary"]["bytes_wasted"].get<double>(), 400'000);
}

}  // namespace
}  // namespace dfl::testing
