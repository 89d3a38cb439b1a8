// The bundled three-caller scenario (docs/design.md §1) under the demand and the
// callbacks models.
#include <gtest/gtest.h>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

const std::string kScenario = std::string(DFL_SCENARIOS) + "/three_callers.jsonl";

nlohmann::json run_model(const char* model) {
  const CliRun run = simulate(read_file(kScenario), {"--model", model});
  return run.result;
}

std::vector<nlohmann::json> tasks_of(const nlohmann::json& result, const std::string& artifact) {
  std::vector<nlohmann::json> out;
  for (const auto& t : result["tasks"]) {
    if (t["artifact"] == artifact) out.push_back(t);
  }
  return out;
}

TEST(ThreeCallersScenario, DemandModelOneTransferOneInstallAndThePriorityFallsBack) {
  const nlohmann::json r = run_model("demand");
  const auto rock = tasks_of(r, "rock");
  ASSERT_EQ(rock.size(), 1u);
  EXPECT_EQ(rock[0]["attempts"], 1);
  EXPECT_EQ(rock[0]["installs"], 1);
  // 0 (prefetch), 3 (camera), 2 (camera lowered to 1, session 2), 1 (session
  // gone), 0 (camera gone); its end (installed, the prefetch told) is no change.
  std::vector<nlohmann::json> priorities;
  for (const auto& [t, p] :
       rock[0]["priority_timeline"].get<std::vector<std::pair<double, nlohmann::json>>>()) {
    priorities.push_back(p);
  }
  EXPECT_EQ(nlohmann::json(priorities), nlohmann::json::parse("[0, 3, 2, 1, 0]"));
  EXPECT_EQ(demand_record(r, "rock-prefetch")["outcome"], "succeeded");
  EXPECT_EQ(demand_record(r, "rock-camera")["outcome"], "cancelled");
  EXPECT_EQ(demand_record(r, "rock-session")["outcome"], "owner_ended");
  EXPECT_EQ(demand_record(r, "terrain-stream")["outcome"], "succeeded");
  EXPECT_EQ(demand_record(r, "grass-ui")["outcome"], "succeeded");
  // Back at 0, the rock waits for grass (1): grass finishes first.
  EXPECT_LT(demand_record(r, "grass-ui")["t_end"].get<double>(),
            demand_record(r, "rock-prefetch")["t_end"].get<double>());
  EXPECT_EQ(r["summary"]["priority_pollution_s"], 0.0);
  EXPECT_EQ(r["summary"]["bytes_wasted"], 0);
}

TEST(ThreeCallersScenario, CallbacksModelShowsItsDefectsInItsNumbers) {
  const nlohmann::json r = run_model("callbacks");
  // The session's teardown cancels the whole rock task: the bystanders lose.
  EXPECT_EQ(demand_record(r, "rock-prefetch")["outcome"], "cancelled");
  EXPECT_EQ(demand_record(r, "rock-camera")["outcome"], "cancelled");
  EXPECT_EQ(r["summary"]["outcomes"]["succeeded"], 2) << "terrain and grass only";
  for (const auto& t : tasks_of(r, "rock"))
    EXPECT_EQ(t["installs"], 0);
  // The camera lowered to 1 at 1.4 but the legacy priority stayed 3 until the
  // task died at 1.5.
  EXPECT_NEAR(r["summary"]["priority_pollution_s"].get<double>(), 0.1, 1e-9);
}

}  // namespace
}  // namespace dfl::testing
