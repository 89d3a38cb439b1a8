// The three-caller story of docs/design.md §1, driven by hand with explicit times.
//
// One transfer slot is held by a terrain download, so the rock waits in the
// queue behind a normal-priority grass download. Then:
//   t=0.1 streaming prefetches the rock (background, 0)
//   t=0.2 the UI asks for grass (normal, 1): grass is ahead of the rock
//   t=1.0 the camera needs the rock now (critical, 3): the rock jumps ahead
//   t=1.2 a session preloads the rock (high, 2)
//   t=1.5 the session is destroyed: only its wait ends; the rock stays at 3
//   t=1.8 the object leaves the view: the rock falls back to 0, behind grass
//   t=2.0 terrain finishes: grass (1) gets the slot, not the rock (0)
//   t=3.0 grass finishes: the rock transfers, once; verify + install, once
//   t=4.0 streaming, the one caller still waiting for the rock, succeeds.
#include <gtest/gtest.h>

#include "driver.h"

namespace dfl::testing {
namespace {

constexpr OwnerId kStreaming = 1, kUi = 2, kCamera = 3, kSession = 4;

TEST(ThreeCallers, OneTransferOneInstallEachCallerItsOwnTerminal) {
  SchedulerConfig config = Driver::small_config();
  config.max_transfers = 1;
  Driver drv(config);
  const ArtifactKey terrain = key("terrain"), rock = key("rock"), grass = key("grass");

  drv.at(0.0);
  const DemandHandle terrain_wait = drv.subscribe(terrain, opts(kStreaming, 0));
  ASSERT_EQ(drv.state_of(terrain), TaskState::transferring);

  drv.at(0.1);
  const DemandHandle prefetch = drv.subscribe(rock, opts(kStreaming, 0));
  drv.at(0.2);
  const DemandHandle grass_wait = drv.subscribe(grass, opts(kUi, 1));
  EXPECT_EQ(drv.priority_of(rock), 0);

  drv.at(1.0);
  const DemandHandle critical = drv.subscribe(rock, opts(kCamera, 3));
  EXPECT_EQ(drv.priority_of(rock), 3) << "the critical caller raises the shared task";
  EXPECT_EQ(drv.scheduler.task_for(rock)->active_demands, 2u);

  drv.at(1.2);
  const DemandHandle preload = drv.subscribe(rock, opts(kSession, 2));
  EXPECT_EQ(drv.priority_of(rock), 3);

  drv.at(1.5);
  drv.end_owner(kSession);
  EXPECT_EQ(drv.outcome(preload), DemandOutcome::owner_ended) << "only the session's wait ends";
  EXPECT_EQ(drv.outcome(prefetch), std::nullopt);
  EXPECT_EQ(drv.outcome(critical), std::nullopt);
  EXPECT_EQ(drv.priority_of(rock), 3);

  drv.at(1.8);
  drv.cancel(critical);
  EXPECT_EQ(drv.outcome(critical), DemandOutcome::cancelled);
  EXPECT_EQ(drv.priority_of(rock), 0) << "back to the highest remaining demand";
  EXPECT_EQ(drv.state_of(rock), TaskState::queued);

  drv.at(2.0);
  drv.complete(terrain);
  EXPECT_EQ(drv.outcome(terrain_wait), DemandOutcome::succeeded);
  EXPECT_EQ(drv.state_of(grass), TaskState::transferring) << "grass (1) now outranks rock (0)";
  EXPECT_EQ(drv.state_of(rock), TaskState::queued);

  drv.at(3.0);
  drv.complete(grass);
  EXPECT_EQ(drv.outcome(grass_wait), DemandOutcome::succeeded);
  ASSERT_EQ(drv.state_of(rock), TaskState::transferring);
  drv.finish_transfer(rock);
  ASSERT_EQ(drv.state_of(rock), TaskState::finalizing);
  EXPECT_EQ(drv.outcome(prefetch), std::nullopt) << "transfer complete is not installed";

  drv.at(4.0);
  drv.finish_finalize(rock);
  EXPECT_EQ(drv.outcomes(prefetch), std::vector{DemandOutcome::succeeded});
  EXPECT_EQ(drv.outcomes(critical), std::vector{DemandOutcome::cancelled});
  EXPECT_EQ(drv.outcomes(preload), std::vector{DemandOutcome::owner_ended});
  EXPECT_EQ(drv.transfers_of(rock), 1u);
  std::size_t rock_finalizes = 0;
  for (const auto& f : drv.finalizes)
    rock_finalizes += f.key == rock;
  EXPECT_EQ(rock_finalizes, 1u);
  EXPECT_EQ(drv.scheduler.live_tasks(), 0u);
  EXPECT_EQ(drv.scheduler.live_demands(), 0u);

  // The rock's priority timeline: 0, raised to 3 by the camera, back to 0.
  const TaskId rock_task = drv.delivered.back().task;
  std::vector<std::optional<Priority>> timeline;
  for (const auto& change : drv.priority_changes) {
    if (change.task == rock_task) timeline.push_back(change.priority);
  }
  EXPECT_EQ(timeline, (std::vector<std::optional<Priority>>{0, 3, 0, std::nullopt}));
}

}  // namespace
}  // namespace dfl::testing
