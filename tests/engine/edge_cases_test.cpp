// Edge cases of the user calls and runtime events (issue: scheduler core).
#include <gtest/gtest.h>

#include <limits>

#include "driver.h"

namespace dfl::testing {
namespace {

TEST(EdgeCases, CancelTwiceGivesOneTerminal) {
  Driver drv;
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 0));
  drv.cancel(a);
  drv.cancel(a);
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::cancelled});
  EXPECT_EQ(drv.scheduler.stats().stale_calls_ignored, 1u);
}

TEST(EdgeCases, CancelAfterTheTerminalIsANoOp) {
  Driver drv;
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 0));
  drv.complete(key("rock"));
  ASSERT_EQ(drv.outcome(a), DemandOutcome::succeeded);
  drv.cancel(a);
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::succeeded});
  EXPECT_TRUE(drv.aborted.empty());
}

TEST(EdgeCases, CancelOfAnUnknownHandleIsANoOp) {
  Driver drv;
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 0));
  drv.cancel(DemandHandle{});                          // Never issued.
  drv.cancel(DemandHandle{a.slot + 50, 0});            // Slot never used.
  drv.cancel(DemandHandle{a.slot, a.generation + 1});  // Future generation.
  EXPECT_EQ(drv.outcome(a), std::nullopt);
  EXPECT_EQ(drv.scheduler.stats().stale_calls_ignored, 3u);
}

// A demand slot is reused after its demand ends; the old handle must not reach
// the new demand.
TEST(EdgeCases, AStaleHandleCannotCancelTheDemandThatReusedItsSlot) {
  Driver drv;
  const DemandHandle old = drv.subscribe(key("rock"), opts(1, 0));
  drv.cancel(old);
  const DemandHandle reused = drv.subscribe(key("rock"), opts(2, 0));
  ASSERT_EQ(reused.slot, old.slot) << "the test needs the slot to be reused";
  drv.cancel(old);
  drv.set_priority(old, 3);
  EXPECT_EQ(drv.outcome(reused), std::nullopt);
  EXPECT_EQ(drv.priority_of(key("rock")), 0);
}

TEST(EdgeCases, SetPriorityOnAnEndedDemandIsANoOp) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  drv.subscribe(rock, opts(1, 1));
  const DemandHandle b = drv.subscribe(rock, opts(2, 0));
  drv.cancel(b);
  drv.set_priority(b, 3);
  EXPECT_EQ(drv.priority_of(rock), 1);
  EXPECT_EQ(drv.outcomes(b), std::vector{DemandOutcome::cancelled});
}

TEST(EdgeCases, EndOwnerWhileFinalizingEndsTheWaitsAndTheInstallStillHappens) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b = drv.subscribe(rock, opts(1, 2));
  drv.finish_transfer(rock);
  ASSERT_EQ(drv.state_of(rock), TaskState::finalizing);

  drv.end_owner(1);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::owner_ended);
  EXPECT_EQ(drv.outcome(b), DemandOutcome::owner_ended);
  EXPECT_EQ(drv.state_of(rock), TaskState::finalizing) << "finalize completes, nobody told";
  EXPECT_EQ(drv.priority_of(rock), std::nullopt);

  const std::size_t deliveries = drv.delivered.size();
  drv.finish_finalize(rock);
  EXPECT_EQ(drv.delivered.size(), deliveries);
  EXPECT_EQ(drv.scheduler.stats().installs, 1u);

  // The install is not lost: the next caller hits the installed index.
  const DemandHandle later = drv.subscribe(rock, opts(2, 0));
  EXPECT_EQ(drv.outcome(later), DemandOutcome::succeeded);
  EXPECT_EQ(drv.transfers_of(rock), 1u);
}

TEST(EdgeCases, ADeadlineEqualToNowTimesOutAtOnceWithoutATask) {
  Driver drv;
  drv.at(3.0);
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 0, /*deadline_s=*/3.0));
  EXPECT_EQ(drv.outcome(a), DemandOutcome::timed_out);
  EXPECT_EQ(drv.scheduler.live_tasks(), 0u);
  EXPECT_TRUE(drv.started.empty());
}

TEST(EdgeCases, ADeadlineEndsThatDemandAloneAtExactlyItsTime) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle patient = drv.subscribe(rock, opts(1, 0));
  const DemandHandle hurried = drv.subscribe(rock, opts(2, 3, /*deadline_s=*/2.0));
  EXPECT_EQ(drv.scheduler.next_wakeup_s(), 2.0);
  drv.tick(1.999);
  EXPECT_EQ(drv.outcome(hurried), std::nullopt);
  drv.tick(2.0);
  EXPECT_EQ(drv.outcome(hurried), DemandOutcome::timed_out);
  EXPECT_EQ(drv.priority_of(rock), 0);
  EXPECT_EQ(drv.scheduler.next_wakeup_s(), std::nullopt);
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(patient), DemandOutcome::succeeded);
}

// A runtime that is late with on_timer still never delivers success after a
// deadline: every entry point first fires what was due.
TEST(EdgeCases, ASuccessArrivingAfterADeadlineIsNotDeliveredToThatDemand) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle hurried = drv.subscribe(rock, opts(1, 0, /*deadline_s=*/1.0));
  const DemandHandle patient = drv.subscribe(rock, opts(2, 0));
  drv.finish_transfer(rock);
  drv.at(1.5);  // No on_timer at 1.0.
  drv.finish_finalize(rock);
  EXPECT_EQ(drv.outcomes(hurried), std::vector{DemandOutcome::timed_out});
  EXPECT_EQ(drv.outcomes(patient), std::vector{DemandOutcome::succeeded});
}

TEST(EdgeCases, CancelFromInsideADeliveryCallbackIsSafeAndGivesNoSecondTerminal) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b = drv.subscribe(rock, opts(2, 0));
  bool ran = false;
  drv.on_terminal[a] = [&](DemandOutcome) {
    ran = true;
    drv.cancel(b);  // b's terminal was decided in the same engine call.
  };
  drv.on_terminal[b] = [&](DemandOutcome) { drv.cancel(a); };
  drv.complete(rock);
  EXPECT_TRUE(ran);
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::succeeded});
  EXPECT_EQ(drv.outcomes(b), std::vector{DemandOutcome::succeeded});
}

TEST(EdgeCases, SubscribeFromInsideADeliveryCallbackHitsTheInstalledIndex) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  std::optional<DemandHandle> again;
  drv.on_terminal[a] = [&](DemandOutcome) { again = drv.subscribe(rock, opts(1, 0)); };
  drv.complete(rock);
  ASSERT_TRUE(again);
  EXPECT_EQ(drv.outcome(*again), DemandOutcome::succeeded);
  EXPECT_EQ(drv.transfers_of(rock), 1u);
}

TEST(EdgeCases, SubscribeFromInsideACancelCallbackStartsANewTask) {
  Driver drv;
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 0));
  std::optional<DemandHandle> replacement;
  drv.on_terminal[a] = [&](DemandOutcome outcome) {
    EXPECT_EQ(outcome, DemandOutcome::cancelled);
    replacement = drv.subscribe(key("grass"), opts(1, 0));
  };
  drv.cancel(a);
  ASSERT_TRUE(replacement);
  EXPECT_EQ(drv.state_of(key("grass")), TaskState::transferring);
}

TEST(EdgeCases, ACacheHitIsDeliveredThroughTheOutboxNotInline) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  drv.subscribe(rock, opts(1, 0));
  drv.complete(rock);

  Scheduler& s = drv.scheduler;
  ASSERT_FALSE(s.has_commands());
  const DemandHandle hit = s.subscribe(drv.now, rock, opts(2, 0));
  EXPECT_FALSE(s.demand(hit)) << "the demand ended inside the call";
  ASSERT_TRUE(s.has_commands()) << "its terminal waits in the outbox";
  const std::vector<Command> commands = s.take_commands();
  ASSERT_EQ(commands.size(), 1u);
  const auto* deliver = std::get_if<Deliver>(&commands[0]);
  ASSERT_NE(deliver, nullptr);
  EXPECT_EQ(deliver->demand, hit);
  EXPECT_EQ(deliver->outcome, DemandOutcome::succeeded);
  EXPECT_EQ(deliver->task, TaskId{}) << "no task served it";
  EXPECT_EQ(s.stats().cache_hits, 1u);
  EXPECT_EQ(s.stats().transfers_started, 1u);
}

TEST(EdgeCases, AForgottenInstallIsFetchedAgainAndForgettingTwiceIsHarmless) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  drv.subscribe(rock, opts(1, 0));
  drv.complete(rock);
  Scheduler& s = drv.scheduler;
  // Another process evicted it: the runtime found its bytes gone.
  s.forget_installed(drv.now, rock);
  s.forget_installed(drv.now, rock);
  s.forget_installed(drv.now, key("never installed"));
  EXPECT_FALSE(s.has_commands()) << "forgetting emits nothing";
  drv.subscribe(rock, opts(2, 0));
  EXPECT_EQ(drv.state_of(rock), TaskState::transferring) << "no cache hit: a new task";
  EXPECT_EQ(s.stats().cache_hits, 0u);
  EXPECT_EQ(s.stats().transfers_started, 2u);
}

TEST(EdgeCases, ALateFinishedEventForAnAbortedTransferIsIgnored) {
  Driver drv;  // Default orphan policy: abort.
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const TransferId first = drv.transfer_of(rock);
  drv.cancel(a);
  ASSERT_EQ(drv.aborted.size(), 1u);
  EXPECT_EQ(drv.aborted[0].transfer, first);

  // A subscribe after the abort decision starts a fresh task, not the dead one.
  const DemandHandle b = drv.subscribe(rock, opts(2, 0));
  const TransferId second = drv.transfer_of(rock);
  EXPECT_NE(second, first);
  EXPECT_NE(drv.started.back().task, drv.started.front().task);
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 0u);

  // The aborted transfer's late events change nothing.
  drv.scheduler.on_transfer_progress(drv.now, first, 999);
  drv.finish_transfer(first, TransferStatus::ok, 1000);
  EXPECT_EQ(drv.state_of(rock), TaskState::transferring);
  EXPECT_EQ(drv.outcome(b), std::nullopt);
  EXPECT_EQ(drv.scheduler.stats().late_events_ignored, 2u);
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(b), DemandOutcome::succeeded);
}

TEST(EdgeCases, ALateFinalizeEventAndAnEventOfTheWrongKindAreIgnored) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const TransferId transfer = drv.transfer_of(rock);
  drv.scheduler.on_finalize_finished(drv.now, FinalizeId{transfer.value},
                                     FinalizeStatus::installed);  // Wrong kind of id.
  drv.drain();
  EXPECT_EQ(drv.outcome(a), std::nullopt);
  drv.complete(rock);
  drv.finish_finalize(drv.finalizes.back().finalize, FinalizeStatus::installed);  // Twice.
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::succeeded});
  EXPECT_EQ(drv.scheduler.stats().late_events_ignored, 2u);
  EXPECT_EQ(drv.scheduler.stats().installs, 1u);
}

TEST(EdgeCases, AnotherRevisionTargetOrGenerationIsAnotherTask) {
  SchedulerConfig config = Driver::small_config();
  config.max_transfers = 8;
  config.max_per_origin = 8;
  Driver drv(config);
  const std::vector<ArtifactKey> keys = {key("rock", "r1", "pc", 0), key("rock", "r2", "pc", 0),
                                         key("rock", "r1", "mobile", 0),
                                         key("rock", "r1", "pc", 1)};
  for (const auto& k : keys)
    drv.subscribe(k, opts(1, 0));
  EXPECT_EQ(drv.scheduler.live_tasks(), 4u);
  EXPECT_EQ(drv.started.size(), 4u);
  for (const auto& k : keys)
    EXPECT_EQ(drv.transfers_of(k), 1u);
  // And the same key again joins.
  drv.subscribe(keys[2], opts(2, 0));
  EXPECT_EQ(drv.started.size(), 4u);
}

TEST(EdgeCases, AStaleOwnerGenerationIsRefusedThroughTheOutbox) {
  Driver drv;
  DemandOptions gen1 = opts(7, 0);
  gen1.owner_generation = 1;
  DemandOptions gen2 = opts(7, 0);
  gen2.owner_generation = 2;
  const DemandHandle old_life = drv.subscribe(key("rock"), gen1);
  drv.end_owner(7, 1);
  EXPECT_EQ(drv.outcome(old_life), DemandOutcome::owner_ended);
  const DemandHandle late = drv.subscribe(key("rock"), gen1);
  EXPECT_EQ(drv.outcome(late), DemandOutcome::owner_ended);
  const DemandHandle new_life = drv.subscribe(key("rock"), gen2);
  EXPECT_EQ(drv.outcome(new_life), std::nullopt) << "a newer generation is a new life";
}

TEST(EdgeCases, ASubscribeWithThePrecomputedKeyHashJoinsTheSameTask) {
  // The simulator hashes each artifact's key once and passes the hash along.
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b =
      drv.scheduler.subscribe(drv.now, rock, drv.scheduler.key_hash(rock), opts(2, 5));
  drv.drain();
  EXPECT_EQ(drv.scheduler.stats().tasks_created, 1u);
  EXPECT_EQ(drv.scheduler.task_for(rock)->active_demands, 2u);
  EXPECT_EQ(drv.scheduler.task_for(rock)->effective_priority, 5);
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::succeeded);
  EXPECT_EQ(drv.outcome(b), DemandOutcome::succeeded);
}

TEST(EdgeCases, TheKeyHashFollowsTheModelsIdentity) {
  ArtifactKey other_revision = key("rock");
  other_revision.revision = "r2";
  SchedulerConfig legacy = Driver::small_config();
  legacy.model = Model::callbacks;
  Scheduler callbacks(legacy);
  EXPECT_EQ(callbacks.key_hash(key("rock")), callbacks.key_hash(other_revision))
      << "the callbacks model knows a key by its resource name only";
  Scheduler demand(Driver::small_config());
  EXPECT_NE(demand.key_hash(key("rock")), demand.key_hash(other_revision));
}

TEST(EdgeCases, EventsNamingAnotherTasksSlotOrNoTaskAreIgnored) {
  // Operation ids carry their task's slot: an id from a slot reused by
  // another task, or from no slot at all, must find nothing.
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const TransferId first = drv.transfer_of(rock);
  drv.cancel(a);  // The slot is freed; the next task reuses it.
  const DemandHandle b = drv.subscribe(rock, opts(2, 0));
  const TransferId second = drv.transfer_of(rock);
  EXPECT_NE(first.value, second.value);
  EXPECT_EQ(first.value & 0xffffffffu, second.value & 0xffffffffu) << "the same slot, reused";
  const std::uint64_t ignored = drv.scheduler.stats().late_events_ignored;
  drv.finish_transfer(first, TransferStatus::ok);
  drv.finish_transfer(TransferId{second.value + 7}, TransferStatus::ok);  // No such slot.
  drv.finish_transfer(TransferId{0}, TransferStatus::ok);
  EXPECT_EQ(drv.scheduler.stats().late_events_ignored, ignored + 3);
  EXPECT_EQ(drv.outcome(b), std::nullopt);
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(b), DemandOutcome::succeeded);
}

#ifndef NDEBUG
TEST(EdgeCasesDeathTest, ASubscribeWithAnotherKeysHashIsAProgrammerError) {
  EXPECT_DEATH(
      {
        Scheduler s;
        s.subscribe(0, key("rock"), s.key_hash(key("sand")), DemandOptions{});
      },
      "not key_hash");
}
#endif

TEST(EdgeCasesDeathTest, TimeGoingBackwardsIsAProgrammerError) {
  EXPECT_DEATH(
      {
        Scheduler s;
        s.on_timer(2.0);
        s.on_timer(1.0);
      },
      "time went backwards");
}

// hold_starts (a runtime's pause): queued tasks at or below the level start
// nothing; one above it starts; lifting the hold, or raising a held task
// above the level, starts them. A transfer already running is not touched.
TEST(EdgeCases, HeldStartsWaitUntilTheHoldIsLifted) {
  Driver drv;
  drv.scheduler.hold_starts(drv.now, Priority{0});
  drv.drain();
  const DemandHandle low = drv.subscribe(key("rock"), opts(1, 0));
  EXPECT_TRUE(drv.started.empty()) << "held at priority 0";
  EXPECT_EQ(drv.state_of(key("rock")), TaskState::queued);
  drv.subscribe(key("paper"), opts(1, 5));
  ASSERT_EQ(drv.started.size(), 1u) << "above the level: starts";
  EXPECT_EQ(*drv.started[0].key, key("paper"));
  drv.scheduler.hold_starts(drv.now, std::nullopt);
  drv.drain();
  ASSERT_EQ(drv.started.size(), 2u);
  EXPECT_EQ(*drv.started[1].key, key("rock"));
  drv.complete(key("rock"));
  EXPECT_EQ(drv.outcome(low), DemandOutcome::succeeded);
}

TEST(EdgeCases, AHeldTaskRaisedAboveTheLevelStarts) {
  Driver drv;
  drv.scheduler.hold_starts(drv.now, Priority{2});
  drv.drain();
  const DemandHandle low = drv.subscribe(key("rock"), opts(1, 1));
  EXPECT_TRUE(drv.started.empty());
  drv.set_priority(low, 3);
  ASSERT_EQ(drv.started.size(), 1u);
  EXPECT_EQ(*drv.started[0].key, key("rock"));
}

TEST(EdgeCases, HoldingEveryPriorityLeavesTheRunningTransferAlone) {
  Driver drv(Driver::one_slot());
  const DemandHandle running = drv.subscribe(key("rock"), opts(1, 9));
  ASSERT_EQ(drv.started.size(), 1u);
  drv.scheduler.hold_starts(drv.now, std::numeric_limits<Priority>::max());
  drv.drain();
  drv.subscribe(key("paper"), opts(1, 9));
  EXPECT_TRUE(drv.aborted.empty()) << "a running transfer is the runtime's to hold";
  drv.complete(key("rock"));  // Its slot frees: the held task still waits.
  EXPECT_EQ(drv.outcome(running), DemandOutcome::succeeded);
  EXPECT_EQ(drv.started.size(), 1u);
  EXPECT_EQ(drv.state_of(key("paper")), TaskState::queued);
}

}  // namespace
}  // namespace dfl::testing
