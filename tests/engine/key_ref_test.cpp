// KeyRef: keys shared between a caller, its task, the commands and the
// installed index, instead of copied at each of them.
#include <gtest/gtest.h>

#include <memory>

#include "driver.h"

namespace dfl::testing {
namespace {

TEST(KeyRef, ComparesByValueWhoeverMadeIt) {
  const KeyRef a(key("rock"));
  const KeyRef b(key("rock"));
  const ArtifactKey rock = key("rock");
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, rock);
  EXPECT_EQ(KeyRef(rock), a);
  EXPECT_FALSE(a == KeyRef(key("rock", "r2")));
  EXPECT_FALSE(KeyRef(rock) == key("moss"));
  EXPECT_FALSE(KeyRef() == a);
  EXPECT_EQ(KeyRef(), KeyRef());
}

TEST(KeyRef, CopiesShareOneKey) {
  const KeyRef rock(key("rock"));
  const KeyRef copy = rock;  // NOLINT: the copy is the point.
  EXPECT_EQ(copy.get(), rock.get());
}

// The task made by a KeyRef subscribe keeps that key: every command of the
// task and the eviction of the installed artifact hand on the same object.
TEST(KeyRef, ATaskSharesTheSubscribersKeyInEveryCommand) {
  SchedulerConfig config = Driver::small_config();
  config.cache_bytes = 1000;  // One artifact fits; the next evicts it.
  Driver drv(config);
  const KeyRef rock(key("rock"));
  drv.scheduler.subscribe(drv.now, rock, drv.scheduler.key_hash(*rock), opts(1, 1));
  drv.drain();
  ASSERT_EQ(drv.started.size(), 1u);
  EXPECT_EQ(drv.started[0].key.get(), rock.get());
  drv.complete(*rock);
  ASSERT_EQ(drv.finalizes.size(), 1u);
  EXPECT_EQ(drv.finalizes[0].key.get(), rock.get());

  drv.subscribe(key("moss"), opts(1, 1));
  drv.complete(key("moss"));
  ASSERT_EQ(drv.evicted.size(), 1u);
  EXPECT_EQ(drv.evicted[0].key.get(), rock.get());
}

// Subscribes with equal keys share one task, whether or not they pass the
// task's own KeyRef, and a later KeyRef subscribe is a cache hit.
TEST(KeyRef, EqualKeysFromAnyRefShareOneTask) {
  Driver drv;
  const KeyRef first(key("rock"));
  const KeyRef second(key("rock"));
  const std::size_t hash = drv.scheduler.key_hash(*first);
  const DemandHandle a = drv.scheduler.subscribe(drv.now, first, hash, opts(1, 1));
  const DemandHandle b = drv.scheduler.subscribe(drv.now, second, hash, opts(2, 1));
  const DemandHandle c = drv.subscribe(key("rock"), opts(3, 1));
  EXPECT_EQ(drv.started.size(), 1u);
  EXPECT_EQ(drv.scheduler.live_tasks(), 1u);
  drv.complete(key("rock"));
  for (DemandHandle h : {a, b, c})
    EXPECT_EQ(drv.outcome(h), DemandOutcome::succeeded);
  const DemandHandle hit = drv.scheduler.subscribe(drv.now, second, hash, opts(4, 1));
  drv.drain();
  EXPECT_EQ(drv.outcome(hit), DemandOutcome::succeeded);
  EXPECT_EQ(drv.started.size(), 1u);
  EXPECT_EQ(drv.scheduler.stats().cache_hits, 1u);
}

// The independent model never shares a task, but its tasks of one key share
// the key: a plain-key subscribe copies the strings only when no live task
// has them.
TEST(KeyRef, TheIndependentModelsTasksOfOneKeyShareTheirKey) {
  SchedulerConfig config = Driver::small_config();
  config.model = Model::independent;
  Driver drv(config);
  drv.subscribe(key("rock"), opts(1, 1));
  drv.subscribe(key("rock"), opts(2, 1));
  drv.subscribe(key("moss"), opts(3, 1));
  ASSERT_EQ(drv.started.size(), 2u);  // Two slots: rock twice.
  EXPECT_NE(drv.started[0].task, drv.started[1].task);
  EXPECT_EQ(drv.started[0].key.get(), drv.started[1].key.get());
  EXPECT_EQ(drv.scheduler.live_tasks(), 3u);
}

// An ended task that installed nothing lets go of its key: the engine pins
// no key of a task that is gone.
TEST(KeyRef, AnEndedTaskHoldsNoReferenceToItsKey) {
  Driver drv;
  auto owned = std::make_shared<const ArtifactKey>(key("rock"));
  std::weak_ptr<const ArtifactKey> watch = owned;
  const KeyRef rock(std::move(owned));
  drv.scheduler.subscribe(drv.now, rock, drv.scheduler.key_hash(*rock), opts(1, 1));
  drv.drain();
  drv.finish_transfer(*rock, TransferStatus::permanent_error);
  EXPECT_EQ(drv.scheduler.live_tasks(), 0u);
  drv.started.clear();  // The driver's record of the command held one too.
  EXPECT_EQ(watch.use_count(), 1) << "only the test's own KeyRef is left";
}

}  // namespace
}  // namespace dfl::testing
