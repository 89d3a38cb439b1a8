// Mirrors and failover (engine/src/mirrors.h, docs/design.md *Mirrors and
// failover*): the next attempt goes to the next origin at once, a round of
// failures backs off, a permanent error excludes an origin for the task, and
// an origin's breaker sends tasks elsewhere while it is open.
#include <gtest/gtest.h>

#include <array>

#include "driver.h"

namespace dfl::testing {
namespace {

constexpr OriginId kA = 0, kB = 1, kC = 2;
const std::array<OriginId, 2> kMirrorsBC{kB, kC};
const std::array<OriginId, 1> kMirrorB{kB};

DemandOptions with_mirrors(std::span<const OriginId> mirrors, Priority p = 0) {
  DemandOptions o = opts(1, p);
  o.origin = kA;
  o.mirrors = mirrors;
  return o;
}

SchedulerConfig config(std::uint32_t breaker_failures = 3) {
  SchedulerConfig c = Driver::small_config();
  c.retry = RetryConfig{4, 1.0, 8.0, 0.0};
  c.breaker = BreakerConfig{breaker_failures, 30.0};
  return c;
}

std::vector<OriginId> origins_started(const Driver& drv, const ArtifactKey& k) {
  std::vector<OriginId> out;
  for (const auto& s : drv.started)
    if (s.key == k) out.push_back(s.origin);
  return out;
}

TEST(Mirrors, AFailedAttemptGoesToTheNextMirrorAtOnceAndResumesItsBytes) {
  Driver drv(config());
  const auto k = key("game.pak");
  const DemandHandle h = drv.subscribe(k, with_mirrors(kMirrorsBC));
  ASSERT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA}));
  drv.finish_transfer(k, TransferStatus::retryable_error, 400);
  // No backoff: B is asked in the same instant, from byte 400.
  ASSERT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB}));
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 400u);
  EXPECT_EQ(drv.started.back().attempt, 2u);
  EXPECT_EQ(drv.scheduler.task_for(k)->origin, kB);
  drv.complete(k);
  EXPECT_EQ(drv.outcome(h), DemandOutcome::succeeded);
  EXPECT_EQ(drv.scheduler.stats().failovers, 1u);
}

TEST(Mirrors, WhenEveryOriginFailedTheTaskBacksOffAndStartsOverAtTheFirst) {
  Driver drv(config());
  const auto k = key("game.pak");
  const DemandHandle h = drv.subscribe(k, with_mirrors(kMirrorsBC));
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);  // A
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);  // B
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);  // C: the round is over.
  EXPECT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB, kC}));
  EXPECT_EQ(drv.state_of(k), TaskState::backoff);
  drv.tick(0.5);
  EXPECT_EQ(drv.started.size(), 3u) << "nothing before the backoff delay";
  drv.tick(drv.scheduler.next_wakeup_s().value());
  EXPECT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB, kC, kA}));
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);  // Attempt 4 of 4.
  EXPECT_EQ(drv.outcome(h), DemandOutcome::failed);
}

TEST(Mirrors, EveryMirrorIsAskedOnceEvenWithFewerAttempts) {
  SchedulerConfig c = config();
  c.retry.max_attempts = 1;
  Driver drv(c);
  const auto k = key("game.pak");
  const DemandHandle h = drv.subscribe(k, with_mirrors(kMirrorsBC));
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);
  EXPECT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB, kC}));
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);
  EXPECT_EQ(drv.outcome(h), DemandOutcome::failed);
}

TEST(Mirrors, APermanentErrorExcludesThatOriginOnlyAndTheLastOneEndsTheTask) {
  Driver drv(config());
  const auto k = key("game.pak");
  const DemandHandle h = drv.subscribe(k, with_mirrors(kMirrorB));
  drv.finish_transfer(k, TransferStatus::permanent_error, 0);  // A: 404.
  EXPECT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB})) << "B at once";
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);  // B: 503, the round is over.
  drv.tick(drv.scheduler.next_wakeup_s().value());
  EXPECT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB, kB})) << "A is not asked again";
  drv.finish_transfer(k, TransferStatus::permanent_error, 0);  // B: 404 as well.
  EXPECT_EQ(drv.outcome(h), DemandOutcome::failed);
  EXPECT_EQ(drv.started.size(), 3u);
}

TEST(Mirrors, ABodyThatFailsVerificationIsFetchedAgainFromTheNextMirror) {
  Driver drv(config());
  const auto k = key("game.pak");
  const DemandHandle h = drv.subscribe(k, with_mirrors(kMirrorB));
  drv.finish_transfer(k);
  drv.finish_finalize(k, FinalizeStatus::verify_failed);
  ASSERT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB}));
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 0u);
  drv.complete(k);
  EXPECT_EQ(drv.outcome(h), DemandOutcome::succeeded);
}

TEST(Mirrors, ABreakerOpensAfterFailuresInARowAndNewTasksSkipThatOrigin) {
  SchedulerConfig c = config(/*breaker_failures=*/2);
  c.max_transfers = 8;
  c.max_per_origin = 8;
  Driver drv(c);
  // Two tasks fail at A: its breaker opens.
  for (const char* name : {"one", "two"}) {
    drv.subscribe(key(name), with_mirrors(kMirrorB));
    drv.finish_transfer(key(name), TransferStatus::retryable_error, 0);
  }
  EXPECT_EQ(drv.scheduler.stats().breaker_opens, 1u);
  // A new task starts at B, although A is its first choice.
  drv.subscribe(key("three"), with_mirrors(kMirrorB));
  EXPECT_EQ(origins_started(drv, key("three")), (std::vector<OriginId>{kB}));
  // A task without mirrors still goes to A: the breaker only chooses.
  DemandOptions alone = opts(1, 0);
  alone.origin = kA;
  drv.subscribe(key("alone"), alone);
  EXPECT_EQ(origins_started(drv, key("alone")), (std::vector<OriginId>{kA}));
  // After open_s the breaker lets A be tried again; a success closes it.
  drv.at(31);
  drv.subscribe(key("four"), with_mirrors(kMirrorB));
  EXPECT_EQ(origins_started(drv, key("four")), (std::vector<OriginId>{kA}));
  drv.complete(key("four"));
  drv.subscribe(key("five"), with_mirrors(kMirrorB));
  EXPECT_EQ(origins_started(drv, key("five")), (std::vector<OriginId>{kA}));
}

TEST(Mirrors, AFailedTrialOpensTheBreakerAgainAtOnce) {
  Driver drv(config(/*breaker_failures=*/2));
  for (const char* name : {"one", "two"}) {
    drv.subscribe(key(name), with_mirrors(kMirrorB));
    drv.finish_transfer(key(name), TransferStatus::retryable_error, 0);
    drv.complete(key(name));  // At B.
  }
  ASSERT_EQ(drv.scheduler.stats().breaker_opens, 1u);
  drv.at(31);
  drv.subscribe(key("trial"), with_mirrors(kMirrorB));
  ASSERT_EQ(origins_started(drv, key("trial")), (std::vector<OriginId>{kA}));
  drv.finish_transfer(key("trial"), TransferStatus::retryable_error, 0);
  EXPECT_EQ(drv.scheduler.stats().breaker_opens, 2u) << "one failure after the pause reopens it";
  drv.complete(key("trial"));
  drv.subscribe(key("after"), with_mirrors(kMirrorB));
  EXPECT_EQ(origins_started(drv, key("after")), (std::vector<OriginId>{kB}));
}

TEST(Mirrors, QueuedTasksMoveWhenTheirOriginsBreakerOpens) {
  SchedulerConfig c = config(/*breaker_failures=*/1);
  c.max_transfers = 1;
  c.max_per_origin = 1;
  Driver drv(c);
  drv.subscribe(key("running"), with_mirrors(kMirrorB));
  drv.subscribe(key("queued"), with_mirrors(kMirrorB));
  ASSERT_EQ(drv.scheduler.task_for(key("queued"))->origin, kA);
  drv.finish_transfer(key("running"), TransferStatus::retryable_error, 0);
  // A's breaker opened: the queued task now waits for B, the failed one too.
  EXPECT_EQ(drv.scheduler.task_for(key("queued"))->origin, kB);
  EXPECT_EQ(drv.scheduler.task_for(key("running"))->origin, kB);
}

TEST(Mirrors, EveryOriginOpenStillAsksTheFirstOneAllowed) {
  Driver drv(config(/*breaker_failures=*/1));
  drv.subscribe(key("x"), with_mirrors(kMirrorB));
  drv.finish_transfer(key("x"), TransferStatus::retryable_error, 0);  // A opens.
  drv.finish_transfer(key("x"), TransferStatus::retryable_error, 0);  // B opens.
  EXPECT_EQ(drv.scheduler.stats().breaker_opens, 2u);
  drv.subscribe(key("y"), with_mirrors(kMirrorB));
  EXPECT_EQ(origins_started(drv, key("y")), (std::vector<OriginId>{kA}));
}

TEST(Mirrors, PerOriginSlotsFollowTheAttempt) {
  SchedulerConfig c = config();
  c.max_transfers = 4;
  c.max_per_origin = 1;
  Driver drv(c);
  drv.subscribe(key("p"), with_mirrors(kMirrorB));
  drv.subscribe(key("q"), with_mirrors(kMirrorB));
  // A's one slot is p's; q waits for A.
  EXPECT_EQ(drv.started.size(), 1u);
  drv.finish_transfer(key("p"), TransferStatus::retryable_error, 0);
  // p moved to B (its slot there), and A's slot went to q.
  EXPECT_EQ(origins_started(drv, key("p")), (std::vector<OriginId>{kA, kB}));
  EXPECT_EQ(origins_started(drv, key("q")), (std::vector<OriginId>{kA}));
}

TEST(Mirrors, JoinersShareTheCreatorsOriginsAndRepeatsAreDropped) {
  Driver drv(config());
  const std::array<OriginId, 3> repeats{kA, kB, kB};
  const auto k = key("game.pak");
  drv.subscribe(k, with_mirrors(repeats));
  DemandOptions other = opts(2, 0);
  other.origin = kC;
  drv.subscribe(k, other);  // Joins: its origin is not asked.
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);
  drv.finish_transfer(k, TransferStatus::retryable_error, 0);
  EXPECT_EQ(origins_started(drv, k), (std::vector<OriginId>{kA, kB}));
  EXPECT_EQ(drv.state_of(k), TaskState::backoff) << "two origins: the round is over";
}

}  // namespace
}  // namespace dfl::testing
