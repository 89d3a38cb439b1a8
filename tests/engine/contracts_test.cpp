// One test per contract of docs/design.md §3, named after it. Each contract is
// checked in every task state where it can be broken (queued, transferring,
// backoff, finalizing); the randomized model-based test checks them under
// random interleavings.
#include <gtest/gtest.h>

#include "driver.h"

namespace dfl::testing {
namespace {

using ::testing::Values;

// Brings a task for `k`, waited on by `d`, into `state`.
void bring_to(Driver& drv, const ArtifactKey& k, TaskState state) {
  switch (state) {
    case TaskState::queued:
      return;  // Callers fill the slots first.
    case TaskState::transferring:
      return;
    case TaskState::backoff:
      drv.finish_transfer(k, TransferStatus::retryable_error, 400);
      return;
    case TaskState::finalizing:
      drv.finish_transfer(k, TransferStatus::ok, 1000);
      return;
  }
}

// Drives the task for `k` to a successful install, whatever state it is in.
void drive_to_install(Driver& drv, const ArtifactKey& k) {
  for (int step = 0; step < 16 && drv.scheduler.task_for(k); ++step) {
    switch (*drv.state_of(k)) {
      case TaskState::queued:
        drv.complete(drv.scheduler.tasks().front().key);
        break;
      case TaskState::backoff:
        drv.tick(drv.scheduler.next_wakeup_s().value());
        break;
      case TaskState::transferring:
        drv.finish_transfer(k);
        break;
      case TaskState::finalizing:
        drv.finish_finalize(k);
        break;
    }
  }
  ASSERT_FALSE(drv.scheduler.task_for(k)) << "task did not finish";
}

class ByState : public ::testing::TestWithParam<TaskState> {
 protected:
  // With one slot held by a blocker, a new task stays queued.
  Driver make_driver() {
    SchedulerConfig c = Driver::small_config();
    c.max_transfers = 1;
    Driver drv(c);
    if (GetParam() == TaskState::queued) drv.subscribe(key("blocker"), opts(99, 0));
    return drv;
  }
};

TEST_P(ByState, Contract1_OneArtifactKeyHasAtMostOneLivePhysicalTask) {
  Driver drv = make_driver();
  const ArtifactKey rock = key("rock");
  drv.subscribe(rock, opts(1, 0));
  bring_to(drv, rock, GetParam());
  ASSERT_EQ(drv.state_of(rock), GetParam());
  const TaskId first = drv.scheduler.task_for(rock)->id;

  drv.subscribe(rock, opts(2, 3));
  drv.subscribe(rock, opts(3, 1));

  EXPECT_EQ(drv.scheduler.task_for(rock)->id, first);
  EXPECT_EQ(drv.scheduler.task_for(rock)->active_demands, 3u);
  EXPECT_LE(drv.transfers_of(rock), 1u);
  std::size_t tasks_for_rock = 0;
  for (const auto& t : drv.scheduler.tasks())
    tasks_for_rock += t.key == rock;
  EXPECT_EQ(tasks_for_rock, 1u);
}

TEST_P(ByState, Contract2_CancellingOneDemandLeavesOthersRunning) {
  Driver drv = make_driver();
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b = drv.subscribe(rock, opts(2, 3));
  bring_to(drv, rock, GetParam());
  const TaskId task = drv.scheduler.task_for(rock)->id;

  drv.cancel(b);

  EXPECT_EQ(drv.outcome(b), DemandOutcome::cancelled);
  EXPECT_EQ(drv.outcome(a), std::nullopt) << "the other demand must keep waiting";
  ASSERT_TRUE(drv.scheduler.task_for(rock));
  EXPECT_EQ(drv.scheduler.task_for(rock)->id, task) << "the task must survive";
  EXPECT_TRUE(drv.aborted.empty());

  // The remaining demand can still succeed.
  drive_to_install(drv, rock);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::succeeded);
  EXPECT_EQ(drv.outcome(b), DemandOutcome::cancelled) << "no second terminal for b";
}

TEST_P(ByState, Contract3_CancellingTopPriorityDemandLowersTheTask) {
  Driver drv = make_driver();
  const ArtifactKey rock = key("rock");
  drv.subscribe(rock, opts(1, 0));
  drv.subscribe(rock, opts(2, 1));
  bring_to(drv, rock, GetParam());
  const DemandHandle critical = drv.subscribe(rock, opts(3, 3));
  ASSERT_EQ(drv.priority_of(rock), 3);

  drv.cancel(critical);
  EXPECT_EQ(drv.priority_of(rock), 1) << "max of the remaining active demands";

  drv.set_priority(critical, 5);  // Ended: no effect.
  EXPECT_EQ(drv.priority_of(rock), 1);
}

TEST_P(ByState, Contract4_RetryAndInstallOncePerOutcome_ExactlyOneTerminalEach) {
  Driver drv = make_driver();
  const ArtifactKey rock = key("rock");
  std::vector<DemandHandle> demands;
  for (OwnerId o = 1; o <= 4; ++o)
    demands.push_back(drv.subscribe(rock, opts(o, 1)));
  bring_to(drv, rock, GetParam());
  drv.cancel(demands[3]);
  drive_to_install(drv, rock);

  // One install, one finalize per transfer that succeeded, one retry at most.
  std::size_t finalizes_for_rock = 0;
  for (const auto& f : drv.finalizes)
    finalizes_for_rock += f.key == rock;
  EXPECT_EQ(finalizes_for_rock, 1u);
  EXPECT_EQ(drv.scheduler.stats().installs, GetParam() == TaskState::queued ? 2u : 1u);
  EXPECT_EQ(drv.transfers_of(rock), GetParam() == TaskState::backoff ? 2u : 1u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(drv.outcomes(demands[i]), std::vector{DemandOutcome::succeeded});
  }
  EXPECT_EQ(drv.outcomes(demands[3]), std::vector{DemandOutcome::cancelled});
  EXPECT_EQ(drv.scheduler.live_demands(), 0u);
}

TEST_P(ByState, Contract5_AnEndedDemandIsNeverDeliveredSuccess) {
  Driver drv = make_driver();
  const ArtifactKey rock = key("rock");
  const DemandHandle keeper = drv.subscribe(rock, opts(1, 0));
  const DemandHandle cancelled = drv.subscribe(rock, opts(2, 0));
  const DemandHandle timed = drv.subscribe(rock, opts(3, 0, /*deadline_s=*/5.0));
  const DemandHandle owned = drv.subscribe(rock, opts(4, 0));
  DemandOptions stale_options = opts(5, 0);
  stale_options.owner_generation = 1;
  drv.end_owner(5, 1);  // Owner 5 is gone through generation 1 ...
  const DemandHandle stale = drv.subscribe(rock, stale_options);  // ... so this is stale.
  bring_to(drv, rock, GetParam());

  drv.cancel(cancelled);
  drv.end_owner(4);
  drv.tick(5.0);  // The deadline passes.

  drive_to_install(drv, rock);

  EXPECT_EQ(drv.outcomes(keeper), std::vector{DemandOutcome::succeeded});
  EXPECT_EQ(drv.outcomes(cancelled), std::vector{DemandOutcome::cancelled});
  EXPECT_EQ(drv.outcomes(timed), std::vector{DemandOutcome::timed_out});
  EXPECT_EQ(drv.outcomes(owned), std::vector{DemandOutcome::owner_ended});
  EXPECT_EQ(drv.outcomes(stale), std::vector{DemandOutcome::owner_ended});
}

INSTANTIATE_TEST_SUITE_P(Contracts, ByState,
                         Values(TaskState::queued, TaskState::transferring, TaskState::backoff,
                                TaskState::finalizing),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// Contract 5 when the physical task continues with nobody waiting: the orphan
// completes and installs, and the demand that left is still not told success.
TEST(Contracts, Contract5_AnEndedDemandIsNeverDeliveredSuccess_EvenWhenTheOrphanCompletes) {
  Driver drv(Driver::small_config(), std::make_shared<CompleteEveryOrphan>());
  const ArtifactKey rock = key("rock");
  const DemandHandle only = drv.subscribe(rock, opts(1, 2));
  drv.cancel(only);
  ASSERT_EQ(drv.state_of(rock), TaskState::transferring);
  EXPECT_EQ(drv.priority_of(rock), std::nullopt) << "orphan level";
  drv.complete(rock);
  EXPECT_EQ(drv.outcomes(only), std::vector{DemandOutcome::cancelled});
  EXPECT_EQ(drv.scheduler.stats().installs, 1u);
}

}  // namespace
}  // namespace dfl::testing
