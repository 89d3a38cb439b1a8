// The task life cycle of docs/design.md §3: queue order, slots, no preemption,
// retry with backoff and a kept resume offset, orphans, the installed index,
// and the independent model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "driver.h"

namespace dfl::testing {
namespace {

SchedulerConfig one_slot() { return Driver::one_slot(); }

// Which keys started transferring, in order.
std::vector<std::string> start_order(const Driver& drv) {
  std::vector<std::string> out;
  for (const auto& s : drv.started)
    out.push_back(s.key->resource);
  return out;
}

TEST(Lifecycle, TheQueueIsOrderedByPriorityThenFirstEnqueue) {
  Driver drv(one_slot());
  drv.subscribe(key("blocker"), opts(1, 0));
  drv.subscribe(key("a"), opts(1, 1));
  drv.subscribe(key("b"), opts(1, 2));
  drv.subscribe(key("c"), opts(1, 1));
  drv.subscribe(key("d"), opts(1, 2));
  for (const char* k : {"blocker", "b", "d", "a"})
    drv.complete(key(k));
  EXPECT_EQ(start_order(drv), (std::vector<std::string>{"blocker", "b", "d", "a", "c"}));
}

TEST(Lifecycle, RaisingAndLoweringADemandReordersTheQueue) {
  Driver drv(one_slot());
  drv.subscribe(key("blocker"), opts(1, 0));
  const DemandHandle a = drv.subscribe(key("a"), opts(1, 1));
  const DemandHandle b = drv.subscribe(key("b"), opts(1, 1));
  drv.set_priority(b, 3);  // b jumps ahead of a.
  drv.set_priority(b, 0);  // ... and falls behind it again.
  drv.set_priority(a, 2);
  drv.complete(key("blocker"));
  drv.complete(key("a"));
  EXPECT_EQ(start_order(drv), (std::vector<std::string>{"blocker", "a", "b"}));
}

TEST(Lifecycle, ATaskKeepsItsPlaceInTheQueueAcrossBackoff) {
  Driver drv(one_slot());
  drv.subscribe(key("first"), opts(1, 1));
  drv.subscribe(key("second"), opts(1, 1));
  drv.finish_transfer(key("first"), TransferStatus::retryable_error, 0);
  ASSERT_EQ(drv.state_of(key("first")), TaskState::backoff);
  ASSERT_EQ(drv.state_of(key("second")), TaskState::transferring);
  drv.subscribe(key("third"), opts(1, 1));
  drv.tick(*drv.scheduler.next_wakeup_s());
  ASSERT_EQ(drv.state_of(key("first")), TaskState::queued);
  drv.complete(key("second"));
  EXPECT_EQ(start_order(drv), (std::vector<std::string>{"first", "second", "first"}))
      << "the retried task was enqueued first, so it goes before third";
}

TEST(Lifecycle, AServersRetryAfterDelaysTheRetryBeyondTheBackoff) {
  Driver drv(one_slot());
  drv.subscribe(key("busy"), opts(1, 1));
  drv.scheduler.on_transfer_finished(drv.now, drv.transfer_of(key("busy")),
                                     TransferStatus::retryable_error, 0, /*retry_after_s=*/30.0);
  drv.drain();
  ASSERT_EQ(drv.state_of(key("busy")), TaskState::backoff);
  EXPECT_DOUBLE_EQ(*drv.scheduler.next_wakeup_s(), drv.now + 30.0)
      << "the backoff alone is well under 30 s; the server's word wins";
  drv.subscribe(key("calm"), opts(1, 1));
  drv.finish_transfer(key("calm"), TransferStatus::retryable_error, 0);  // No Retry-After.
  EXPECT_LT(*drv.scheduler.next_wakeup_s(), drv.now + 30.0) << "only the busy task waits 30 s";
}

TEST(Lifecycle, ASaturatedOriginDoesNotBlockAnotherOrigin) {
  SchedulerConfig c = Driver::small_config();
  c.max_transfers = 3;
  c.max_per_origin = 1;
  Driver drv(c);
  DemandOptions cdn = opts(1, 3);
  DemandOptions mirror = opts(1, 0);
  mirror.origin = 1;
  drv.subscribe(key("a"), cdn);
  drv.subscribe(key("b"), cdn);  // Waits: its origin is at its limit.
  drv.subscribe(key("c"), mirror);
  EXPECT_EQ(drv.state_of(key("b")), TaskState::queued);
  EXPECT_EQ(drv.state_of(key("c")), TaskState::transferring)
      << "lower priority, but its origin has a free slot";
  EXPECT_EQ(drv.scheduler.running_transfers(), 2u);
}

TEST(Lifecycle, ACriticalDemandNeverPreemptsARunningTransfer) {
  Driver drv(one_slot());
  drv.subscribe(key("background"), opts(1, 0));
  drv.subscribe(key("urgent"), opts(2, 3));
  EXPECT_TRUE(drv.aborted.empty());
  EXPECT_EQ(drv.state_of(key("background")), TaskState::transferring);
  EXPECT_EQ(drv.state_of(key("urgent")), TaskState::queued);
  drv.finish_transfer(key("background"));
  EXPECT_EQ(drv.state_of(key("urgent")), TaskState::transferring)
      << "the slot goes to the critical task as soon as it frees";
}

TEST(Lifecycle, RetriesResumeFromTheBytesReceivedAndBackOffExponentially) {
  SchedulerConfig c = Driver::small_config();
  c.retry = RetryConfig{/*max_attempts=*/4, /*base_s=*/0.5, /*cap_s=*/1.5, /*jitter=*/0.2};
  Driver drv(c);
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  std::vector<double> delays;
  std::uint64_t received = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    EXPECT_EQ(drv.started.back().resume_offset_bytes, received);
    EXPECT_EQ(drv.started.back().attempt, static_cast<std::uint32_t>(attempt));
    drv.finish_transfer(rock, TransferStatus::retryable_error, 200);
    received += 200;
    EXPECT_EQ(drv.outcome(a), std::nullopt) << "a retryable failure is not a terminal";
    ASSERT_EQ(drv.state_of(rock), TaskState::backoff);
    const double wake = *drv.scheduler.next_wakeup_s();
    delays.push_back(wake - drv.now);
    drv.tick(wake);
  }
  // base * 2^(n-1), capped at 1.5, each within +-20% jitter.
  const double nominal[] = {0.5, 1.0, 1.5};
  for (std::size_t i = 0; i < delays.size(); ++i) {
    EXPECT_GE(delays[i], nominal[i] * 0.8 - 1e-9) << "attempt " << i + 1;
    EXPECT_LE(delays[i], nominal[i] * 1.2 + 1e-9) << "attempt " << i + 1;
  }
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 600u);
  drv.finish_transfer(rock, TransferStatus::retryable_error, 100);
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::failed}) << "attempts exhausted";
  EXPECT_EQ(drv.task_ends.back().outcome, TaskOutcome::failed);
  EXPECT_EQ(drv.task_ends.back().attempts, 4u);
}

TEST(Lifecycle, BackoffJitterIsDeterministicPerSeed) {
  auto first_delay = [](std::uint64_t seed) {
    SchedulerConfig c = Driver::small_config();
    c.seed = seed;
    Driver drv(c);
    drv.subscribe(key("rock"), opts(1, 0));
    drv.finish_transfer(key("rock"), TransferStatus::retryable_error, 0);
    return *drv.scheduler.next_wakeup_s();
  };
  EXPECT_EQ(first_delay(7), first_delay(7));
  EXPECT_NE(first_delay(7), first_delay(8));
}

TEST(Lifecycle, AVerifyFailureRetriesFromTheStart) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  drv.finish_transfer(rock, TransferStatus::ok, 1000);
  drv.finish_finalize(rock, FinalizeStatus::verify_failed);
  EXPECT_EQ(drv.outcome(a), std::nullopt);
  ASSERT_EQ(drv.state_of(rock), TaskState::backoff);
  drv.tick(*drv.scheduler.next_wakeup_s());
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 0u) << "bad bytes are not resumed from";
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::succeeded);
  EXPECT_EQ(drv.scheduler.stats().installs, 1u);
}

TEST(Lifecycle, ARetryWithoutBackoffStartsAtOnce) {
  // retry base_s 0: the failed attempt's call itself starts the next one
  // (no timer due at that instant is left unfired), after a transfer error
  // and after a failed verification alike.
  SchedulerConfig c = Driver::small_config();
  c.retry.base_s = 0;
  c.retry.jitter = 0;
  Driver drv(c);
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  drv.finish_transfer(rock, TransferStatus::retryable_error, 100);
  EXPECT_EQ(drv.transfers_of(rock), 2u) << "the retry started in the failure's call";
  EXPECT_EQ(drv.state_of(rock), TaskState::transferring);
  EXPECT_EQ(drv.scheduler.next_wakeup_s(), std::nullopt);
  drv.finish_transfer(rock, TransferStatus::ok, 1000);
  drv.finish_finalize(rock, FinalizeStatus::verify_failed);
  EXPECT_EQ(drv.transfers_of(rock), 3u) << "and after a failed verification";
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 0u);
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::succeeded);
}

TEST(Lifecycle, PermanentErrorsFailEveryWaitingDemandOnce) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b = drv.subscribe(rock, opts(2, 3));
  drv.finish_transfer(rock, TransferStatus::permanent_error, 10);
  EXPECT_EQ(drv.outcomes(a), std::vector{DemandOutcome::failed});
  EXPECT_EQ(drv.outcomes(b), std::vector{DemandOutcome::failed});
  EXPECT_EQ(drv.transfers_of(rock), 1u) << "no retry after a permanent error";

  const DemandHandle c = drv.subscribe(rock, opts(3, 0));
  drv.finish_transfer(rock);
  drv.finish_finalize(rock, FinalizeStatus::error);
  EXPECT_EQ(drv.outcomes(c), std::vector{DemandOutcome::failed});
}

TEST(Lifecycle, ATaskInBackoffWithNoDemandLeftIsDropped) {
  Driver drv;
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  drv.finish_transfer(rock, TransferStatus::retryable_error, 300);
  drv.cancel(a);
  EXPECT_FALSE(drv.scheduler.task_for(rock));
  EXPECT_EQ(drv.task_ends.back().outcome, TaskOutcome::dropped);
  EXPECT_EQ(drv.scheduler.next_wakeup_s(), std::nullopt) << "its retry timer is disarmed";
}

TEST(Lifecycle, AnOrphanThatThePolicySaysToCompleteRunsBelowEveryPriority) {
  Driver drv(Driver::small_config(), std::make_shared<CompleteEveryOrphan>());
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 2));
  drv.cancel(a);
  EXPECT_TRUE(drv.aborted.empty());
  EXPECT_EQ(drv.state_of(rock), TaskState::transferring);
  EXPECT_EQ(drv.priority_of(rock), std::nullopt);
}

TEST(Lifecycle, ANewDemandReattachesToAnOrphanStillCompleting) {
  Driver drv(Driver::small_config(), std::make_shared<CompleteEveryOrphan>());
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 2));
  drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(rock), 600);
  drv.cancel(a);
  const TaskId orphan = drv.scheduler.task_for(rock)->id;

  const DemandHandle b = drv.subscribe(rock, opts(2, 1));
  EXPECT_EQ(drv.scheduler.task_for(rock)->id, orphan) << "no second task";
  EXPECT_EQ(drv.priority_of(rock), 1) << "raised from the orphan level";
  EXPECT_EQ(drv.transfers_of(rock), 1u) << "no second transfer";
  drv.complete(rock);
  EXPECT_EQ(drv.outcome(b), DemandOutcome::succeeded);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::cancelled);
}

// Completes while nothing waits for a slot, aborts as soon as something does.
class YieldToQueuedWork final : public OrphanPolicy {
 public:
  std::vector<OrphanView> asked;
  OrphanDecision decide(const OrphanView& view) override {
    asked.push_back(view);
    return view.queued_tasks > 0 && view.free_slots == 0 ? OrphanDecision::abort
                                                         : OrphanDecision::complete;
  }
  std::string_view name() const override { return "yield-to-queued"; }
};

TEST(Lifecycle, AnOrphanIsAskedAgainWhenSlotPressureChanges) {
  auto policy = std::make_shared<YieldToQueuedWork>();
  Driver drv(one_slot(), policy);
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 2));
  drv.scheduler.on_transfer_progress(drv.now + 1.0, drv.transfer_of(rock), 400);
  drv.at(1.0);
  drv.cancel(a);
  ASSERT_EQ(policy->asked.size(), 1u);
  EXPECT_TRUE(policy->asked[0].first_decision);
  EXPECT_EQ(policy->asked[0].bytes_done, 400u);
  EXPECT_EQ(policy->asked[0].bytes_remaining, 600u);
  EXPECT_DOUBLE_EQ(policy->asked[0].throughput_Bps, 400.0);
  EXPECT_EQ(drv.state_of(rock), TaskState::transferring);

  // A new task queues for the slot the orphan holds: the policy is asked
  // again, aborts, and the slot goes to the waiting task.
  drv.subscribe(key("grass"), opts(2, 0));
  ASSERT_EQ(policy->asked.size(), 2u);
  EXPECT_FALSE(policy->asked[1].first_decision);
  EXPECT_EQ(policy->asked[1].queued_tasks, 1u);
  EXPECT_EQ(policy->asked[1].queued_top_priority, 0);
  ASSERT_EQ(drv.aborted.size(), 1u);
  EXPECT_FALSE(drv.scheduler.task_for(rock));
  EXPECT_EQ(drv.state_of(key("grass")), TaskState::transferring);

  // Each answer was announced, for the task, with the bytes done then.
  ASSERT_EQ(drv.orphan_decisions.size(), 2u);
  EXPECT_EQ(drv.orphan_decisions[0].task, drv.aborted[0].task);
  EXPECT_EQ(drv.orphan_decisions[0].decision, OrphanDecision::complete);
  EXPECT_TRUE(drv.orphan_decisions[0].first_decision);
  EXPECT_EQ(drv.orphan_decisions[0].bytes_done, 400u);
  EXPECT_EQ(drv.orphan_decisions[1].decision, OrphanDecision::abort);
  EXPECT_FALSE(drv.orphan_decisions[1].first_decision);
}

TEST(Lifecycle, TheInstalledIndexEvictsTheLeastRecentlyUsed) {
  SchedulerConfig c = Driver::small_config();
  c.cache_bytes = 2000;  // Two 1000-byte artifacts.
  Driver drv(c);
  for (const char* k : {"a", "b"}) {
    drv.subscribe(key(k), opts(1, 0));
    drv.complete(key(k));
  }
  drv.subscribe(key("a"), opts(1, 0));  // Hit: a is now the most recent.
  drv.subscribe(key("c"), opts(1, 0));
  drv.complete(key("c"));
  ASSERT_EQ(drv.evicted.size(), 1u);
  EXPECT_EQ(drv.evicted[0].key, key("b"));
  const DemandHandle a = drv.subscribe(key("a"), opts(2, 0));
  EXPECT_EQ(drv.outcome(a), DemandOutcome::succeeded);
  drv.subscribe(key("b"), opts(2, 0));
  EXPECT_EQ(drv.transfers_of(key("b")), 2u) << "evicted: fetched again";
  EXPECT_EQ(drv.scheduler.stats().cache_hits, 2u);
}

TEST(Lifecycle, TheIndependentModelRunsOneTaskPerDemand) {
  SchedulerConfig c = Driver::small_config();
  c.model = Model::independent;
  c.max_transfers = 4;
  c.max_per_origin = 4;
  Driver drv(c);
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 0));
  const DemandHandle b = drv.subscribe(rock, opts(2, 3));
  EXPECT_EQ(drv.transfers_of(rock), 2u) << "duplicate transfer";
  EXPECT_EQ(drv.scheduler.live_tasks(), 2u);
  drv.cancel(b);
  EXPECT_EQ(drv.aborted.size(), 1u) << "b's own transfer is aborted";
  EXPECT_EQ(drv.outcome(a), std::nullopt);
  drv.finish_transfer(drv.started[0].transfer, TransferStatus::ok);
  drv.finish_finalize(drv.finalizes[0].finalize, FinalizeStatus::installed);
  EXPECT_EQ(drv.outcome(a), DemandOutcome::succeeded);
}

// The independent model queues a task per demand, so one key can have many
// live tasks; they leave the key map in any order (cancelled anywhere in the
// queue, finished oldest first), and the key still finds its newest live task.
// (Debug builds check the key map's links after every call.)
TEST(Lifecycle, TheIndependentModelReleasesManyTasksOfOneKeyInAnyOrder) {
  SchedulerConfig c = Driver::small_config();
  c.model = Model::independent;
  c.max_transfers = 1;
  c.max_per_origin = 1;
  Driver drv(c);
  const ArtifactKey rock = key("rock");
  const DemandHandle busy = drv.subscribe(key("busy"), opts(1, 0));
  std::vector<DemandHandle> live;
  for (OwnerId owner = 1; owner <= 64; ++owner)
    live.push_back(drv.subscribe(rock, opts(owner, 0)));
  EXPECT_EQ(drv.scheduler.live_tasks(), 65u);
  auto newest_task = [&] { return drv.scheduler.demand(live.back())->task; };
  ASSERT_EQ(drv.scheduler.task_for(rock)->id, newest_task());

  // Cancel half of them in a seeded random order: anywhere in the key's list.
  std::mt19937 rng(7);
  std::vector<DemandHandle> order(live.begin(), live.end());
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(32);
  for (const DemandHandle h : order) {
    drv.cancel(h);
    EXPECT_EQ(drv.outcome(h), DemandOutcome::cancelled);
    live.erase(std::find(live.begin(), live.end(), h));
    ASSERT_EQ(drv.scheduler.live_tasks(), live.size() + 1);
    ASSERT_EQ(drv.scheduler.task_for(rock)->id, newest_task());
  }

  // The rest run one at a time, oldest first (FIFO at equal priority).
  drv.finish_transfer(key("busy"), TransferStatus::ok);
  drv.finish_finalize(key("busy"), FinalizeStatus::installed);
  EXPECT_EQ(drv.outcome(busy), DemandOutcome::succeeded);
  while (!live.empty()) {
    const DemandHandle oldest = live.front();
    ASSERT_EQ(drv.started.back().task, drv.scheduler.demand(oldest)->task) << "oldest first";
    drv.finish_transfer(drv.started.back().transfer, TransferStatus::ok);
    drv.finish_finalize(drv.finalizes.back().finalize, FinalizeStatus::installed);
    EXPECT_EQ(drv.outcome(oldest), DemandOutcome::succeeded);
    live.erase(live.begin());
    if (!live.empty()) {
      ASSERT_EQ(drv.scheduler.task_for(rock)->id, newest_task());
    }
  }
  EXPECT_FALSE(drv.scheduler.task_for(rock));
  EXPECT_EQ(drv.scheduler.live_tasks(), 0u);
}

// Two tasks fail at one instant. Whichever order the runtime reports them in
// (SimGrid's timers and its activities, or two threads of the backend, order
// simultaneous events differently), each gets the same retry delay: the
// jitter is drawn from the seed, the task and the attempt, not from a stream
// shared in call order.
TEST(Lifecycle, RetryJitterDoesNotDependOnTheOrderOfSimultaneousFailures) {
  auto restarts = [](bool rock_first) {
    SchedulerConfig c = Driver::small_config();
    c.retry = RetryConfig{/*max_attempts=*/4, /*base_s=*/1.0, /*cap_s=*/8.0, /*jitter=*/0.5};
    c.seed = 11;
    Driver drv(c);
    const ArtifactKey rock = key("rock"), sand = key("sand");
    drv.subscribe(rock, opts(1, 0));
    drv.subscribe(sand, opts(2, 0));
    const TransferId rock_transfer = drv.transfer_of(rock), sand_transfer = drv.transfer_of(sand);
    drv.finish_transfer(rock_first ? rock_transfer : sand_transfer, TransferStatus::retryable_error,
                        0);
    drv.finish_transfer(rock_first ? sand_transfer : rock_transfer, TransferStatus::retryable_error,
                        0);
    std::map<std::string, double> restarted;  // Resource -> when attempt 2 started.
    while (restarted.size() < 2) {
      const auto wake = drv.scheduler.next_wakeup_s();
      if (!wake) break;
      const std::size_t before = drv.started.size();
      drv.tick(*wake);
      for (std::size_t i = before; i < drv.started.size(); ++i)
        restarted[drv.started[i].key->resource] = drv.now;
    }
    return restarted;
  };
  const std::map<std::string, double> rock_first = restarts(true), sand_first = restarts(false);
  ASSERT_EQ(rock_first.size(), 2u);
  EXPECT_EQ(rock_first, sand_first);
  EXPECT_NE(rock_first.at("rock"), rock_first.at("sand")) << "jitter is applied per task";
}

TEST(Lifecycle, NextWakeupIsTheEarliestDeadlineOrRetry) {
  Driver drv;
  drv.subscribe(key("rock"), opts(1, 0, /*deadline_s=*/9.0));
  drv.subscribe(key("grass"), opts(1, 0, /*deadline_s=*/4.0));
  EXPECT_EQ(drv.scheduler.next_wakeup_s(), 4.0);
  drv.finish_transfer(key("rock"), TransferStatus::retryable_error, 0);
  const double retry = *drv.scheduler.next_wakeup_s();
  EXPECT_LT(retry, 4.0);
  EXPECT_GT(retry, 0.0);
}

// The engine announces every demand that attaches to a task and every change
// of a demand's priority, and with each change of a task's priority the
// highest its active demands ask for, so that a runtime or a recorder needs
// no copy of the engine's state. A cache hit attaches to nothing.
TEST(Lifecycle, EventsAnnounceAttachingDemandsAndEveryPriorityChange) {
  SchedulerConfig config = Driver::small_config();
  config.model = Model::callbacks;  // Where effective and demanded part.
  Driver drv(config);
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 2));
  const DemandHandle b = drv.subscribe(key("rock"), opts(2, 5));
  ASSERT_EQ(drv.attached.size(), 2u);
  EXPECT_EQ(drv.attached[0].demand, a);
  EXPECT_EQ(drv.attached[1].demand, b);
  EXPECT_EQ(drv.attached[0].task, drv.attached[1].task);
  EXPECT_EQ(drv.attached[1].priority, 5);
  ASSERT_FALSE(drv.priority_changes.empty());
  EXPECT_EQ(drv.priority_changes.back().priority, 5);
  EXPECT_EQ(drv.priority_changes.back().demanded, 5);

  drv.set_priority(b, 1);  // The callbacks model's priority never falls.
  ASSERT_EQ(drv.demand_priority_changes.size(), 1u);
  EXPECT_EQ(drv.demand_priority_changes[0].demand, b);
  EXPECT_EQ(drv.demand_priority_changes[0].priority, 1);
  EXPECT_EQ(drv.priority_changes.back().priority, 5);
  EXPECT_EQ(drv.priority_changes.back().demanded, 2);
  const std::size_t changes = drv.priority_changes.size();
  drv.set_priority(b, 1);  // No change: nothing announced.
  EXPECT_EQ(drv.demand_priority_changes.size(), 1u);
  EXPECT_EQ(drv.priority_changes.size(), changes);

  drv.complete(key("rock"));
  ASSERT_FALSE(drv.priority_changes.empty());
  EXPECT_EQ(drv.priority_changes.back().priority, std::nullopt);
  EXPECT_EQ(drv.priority_changes.back().demanded, std::nullopt);
  const std::size_t attached = drv.attached.size();
  drv.subscribe(key("rock"), opts(3, 1));
  EXPECT_EQ(drv.attached.size(), attached) << "a cache hit attaches to no task";
}

}  // namespace
}  // namespace dfl::testing
