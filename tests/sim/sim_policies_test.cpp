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

}  // namespace
}  // namespace dfl::testing
