// The legacy callbacks model (docs/design.md §2) runs behind the same interface.
// Each of its four defects is shown here, and so are the properties it gets
// right and that this project keeps.
#include <gtest/gtest.h>

#include "driver.h"

namespace dfl::testing {
namespace {

Driver legacy(std::uint32_t slots = 2) {
  SchedulerConfig c = Driver::small_config();
  c.model = Model::callbacks;
  c.max_transfers = slots;
  c.max_per_origin = slots;
  return Driver(c);
}

// Defect 1: cancel is per resource, not per caller.
TEST(CallbacksModel, Defect1_OneCallersCancelEndsEveryOthersWait) {
  Driver drv = legacy();
  const ArtifactKey rock = key("rock");
  const DemandHandle streaming = drv.subscribe(rock, opts(1, 0));
  const DemandHandle camera = drv.subscribe(rock, opts(2, 3));
  drv.cancel(streaming);
  EXPECT_EQ(drv.outcome(streaming), DemandOutcome::cancelled);
  EXPECT_EQ(drv.outcome(camera), DemandOutcome::cancelled) << "the camera never asked to cancel";
  EXPECT_EQ(drv.aborted.size(), 1u) << "the shared transfer is killed";

  // The demand model keeps the camera's wait.
  Driver ours;
  const DemandHandle s2 = ours.subscribe(rock, opts(1, 0));
  const DemandHandle c2 = ours.subscribe(rock, opts(2, 3));
  ours.cancel(s2);
  EXPECT_EQ(ours.outcome(c2), std::nullopt);
  EXPECT_TRUE(ours.aborted.empty());
}

// Defect 1, while installing: the legacy cancel cannot cancel at all, so a
// destroyed session is still told success afterwards.
TEST(CallbacksModel, Defect1_ASessionDestroyedWhileInstallingIsStillToldSuccess) {
  Driver drv = legacy();
  const ArtifactKey rock = key("rock");
  const DemandHandle session = drv.subscribe(rock, opts(4, 2));
  drv.finish_transfer(rock);
  drv.end_owner(4);
  EXPECT_EQ(drv.outcome(session), std::nullopt) << "the cancel was refused";
  EXPECT_EQ(drv.scheduler.stats().cancels_refused, 1u);
  drv.finish_finalize(rock);
  EXPECT_EQ(drv.outcome(session), DemandOutcome::succeeded)
      << "delivered to an owner that no longer exists";
}

// Defect 2: priority only rises.
TEST(CallbacksModel, Defect2_PriorityNeverFallsAfterTheCriticalCallerLeaves) {
  Driver drv = legacy(1);
  drv.subscribe(key("blocker"), opts(9, 0));
  const ArtifactKey rock = key("rock");
  drv.subscribe(rock, opts(1, 0));
  const DemandHandle camera = drv.subscribe(rock, opts(2, 3));
  EXPECT_EQ(drv.priority_of(rock), 3);
  drv.set_priority(camera, 0);
  EXPECT_EQ(drv.priority_of(rock), 3) << "max ever seen";
  // A normal-priority task now waits behind a background prefetch.
  drv.subscribe(key("grass"), opts(3, 1));
  drv.complete(key("blocker"));
  EXPECT_EQ(drv.state_of(rock), TaskState::transferring);
  EXPECT_EQ(drv.state_of(key("grass")), TaskState::queued);
}

// Defect 3: the dedup key is the resource name, so another revision merges.
TEST(CallbacksModel, Defect3_AnotherRevisionIsMergedIntoTheSameTransfer) {
  Driver drv = legacy();
  const DemandHandle old_rev = drv.subscribe(key("rock", "r1"), opts(1, 0));
  const DemandHandle new_rev = drv.subscribe(key("rock", "r2"), opts(2, 0));
  EXPECT_EQ(drv.started.size(), 1u);
  EXPECT_EQ(drv.started[0].key->revision, "r1");
  drv.complete(key("rock", "r1"));
  EXPECT_EQ(drv.outcome(new_rev), DemandOutcome::succeeded) << "told success with r1's bytes";
  EXPECT_EQ(drv.outcome(old_rev), DemandOutcome::succeeded);
  // And r2 is now a cache "hit" although r2 was never downloaded.
  const DemandHandle again = drv.subscribe(key("rock", "r2"), opts(3, 0));
  EXPECT_EQ(drv.outcome(again), DemandOutcome::succeeded);
  EXPECT_EQ(drv.transfers_of(key("rock", "r2")), 0u);
}

// Defect 4: isolation was never tested, and it does not hold: a caller with a
// deadline cannot time out alone (or at all).
TEST(CallbacksModel, Defect4_OneCallerCannotTimeOutWhileTheOthersCarryOn) {
  Driver drv = legacy();
  const ArtifactKey rock = key("rock");
  const DemandHandle hurried = drv.subscribe(rock, opts(1, 3, /*deadline_s=*/1.0));
  drv.subscribe(rock, opts(2, 0));
  drv.tick(5.0);
  EXPECT_EQ(drv.outcome(hurried), std::nullopt) << "waits long past its deadline";
  EXPECT_EQ(drv.scheduler.next_wakeup_s(), std::nullopt) << "no deadline timer exists";
}

// What the legacy model gets right is kept: single flight, no false terminal
// on retry, transfer complete != installed, no preemption.
TEST(CallbacksModel, KeepsSingleFlightRetriesAndNoPreemption) {
  Driver drv = legacy(1);
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b = drv.subscribe(rock, opts(2, 0));
  EXPECT_EQ(drv.started.size(), 1u);
  drv.subscribe(key("urgent"), opts(3, 3));
  EXPECT_TRUE(drv.aborted.empty());
  drv.finish_transfer(rock, TransferStatus::retryable_error, 100);
  EXPECT_EQ(drv.outcome(a), std::nullopt);
  drv.complete(key("urgent"));
  drv.tick(*drv.scheduler.next_wakeup_s());
  drv.finish_transfer(rock);
  EXPECT_EQ(drv.outcome(a), std::nullopt) << "transfer complete is not installed";
  drv.finish_finalize(rock);
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::succeeded});
  EXPECT_EQ(drv.outcomes(b), std::vector{DemandOutcome::succeeded});
  EXPECT_EQ(drv.scheduler.stats().installs, 2u);
}

}  // namespace
}  // namespace dfl::testing
