// ThrottleRule (engine/include/demandflight/engine/throttle.h): which
// transfers the runtimes cap, computed from the engine's commands alone.
#include <gtest/gtest.h>

#include "demandflight/engine/throttle.h"
#include "driver.h"

namespace dfl::testing {
namespace {

// Feeds the rule what the driver drained since the last call.
class Follower {
 public:
  explicit Follower(ThrottleConfig config) : rule(config) {}
  void catch_up(const Driver& drv) {
    for (; changes_ < drv.priority_changes.size(); ++changes_)
      rule.observe(Command{drv.priority_changes[changes_]});
    for (; ends_ < drv.task_ends.size(); ++ends_)
      rule.observe(Command{drv.task_ends[ends_]});
  }
  ThrottleRule rule;

 private:
  std::size_t changes_ = 0, ends_ = 0;
};

TaskId task_of(const Driver& drv, const ArtifactKey& k) { return drv.scheduler.task_for(k)->id; }

TEST(ThrottleRule, TheBackgroundCapAppliesOnlyWhileADemandAboveTheLevelWaits) {
  Driver drv;
  Follower f(ThrottleConfig{0, 1e6, 0});
  drv.subscribe(key("prefetch"), opts(1, 0));
  f.catch_up(drv);
  const TaskId prefetch = task_of(drv, key("prefetch"));
  EXPECT_TRUE(f.rule.is_background(prefetch));
  EXPECT_FALSE(f.rule.background_limited()) << "nothing above the level waits";
  EXPECT_EQ(f.rule.class_cap_Bps(prefetch), std::nullopt);
  drv.subscribe(key("critical"), opts(2, 3));
  f.catch_up(drv);
  EXPECT_TRUE(f.rule.background_limited());
  EXPECT_EQ(f.rule.class_cap_Bps(prefetch), 1e6);
  EXPECT_FALSE(f.rule.is_background(task_of(drv, key("critical"))));
  drv.complete(key("critical"));
  f.catch_up(drv);
  EXPECT_FALSE(f.rule.background_limited()) << "the critical demand was served";
}

TEST(ThrottleRule, ATaskRaisedAboveTheLevelLeavesTheClassAndAnOrphanIsInIt) {
  SchedulerConfig c = Driver::small_config();
  Driver drv(c, std::make_shared<CompleteEveryOrphan>());
  Follower f(ThrottleConfig{0, 1e6, 0});
  const DemandHandle h = drv.subscribe(key("prefetch"), opts(1, 0));
  f.catch_up(drv);
  const TaskId prefetch = task_of(drv, key("prefetch"));
  drv.set_priority(h, 2);
  f.catch_up(drv);
  EXPECT_FALSE(f.rule.is_background(prefetch));
  EXPECT_TRUE(f.rule.background_limited()) << "its own demand is above the level now";
  drv.cancel(h);  // Nobody waits; the orphan completes.
  f.catch_up(drv);
  ASSERT_EQ(drv.state_of(key("prefetch")), TaskState::transferring);
  EXPECT_TRUE(f.rule.is_background(prefetch)) << "an orphan runs below every level";
  EXPECT_FALSE(f.rule.background_limited());
}

TEST(ThrottleRule, ANewLevelRejudgesWhoWaitsAboveIt) {
  Driver drv;
  Follower f(ThrottleConfig{0, 1e6, 0});
  drv.subscribe(key("a"), opts(1, 1));
  drv.subscribe(key("b"), opts(1, 0));
  f.catch_up(drv);
  EXPECT_TRUE(f.rule.background_limited());
  EXPECT_TRUE(f.rule.set(ThrottleConfig{1, 1e6, 0}));
  EXPECT_FALSE(f.rule.background_limited()) << "nothing above 1";
  EXPECT_TRUE(f.rule.is_background(task_of(drv, key("a"))));
  EXPECT_FALSE(f.rule.set(ThrottleConfig{1, 1e6, 0})) << "the same setting changes nothing";
  EXPECT_TRUE(f.rule.set(ThrottleConfig{std::nullopt, 0, 5e6}));
  EXPECT_FALSE(f.rule.is_background(task_of(drv, key("a"))));
  EXPECT_EQ(f.rule.overall_Bps(), 5e6);
}

TEST(ThrottleRule, TheLegacyPriorityThatNeverFallsStillSeesTheDemandsLeave) {
  SchedulerConfig c = Driver::small_config();
  c.model = Model::callbacks;
  Driver drv(c);
  Follower f(ThrottleConfig{0, 1e6, 0});
  drv.subscribe(key("x"), opts(1, 0));
  const DemandHandle high = drv.subscribe(key("x", "r1", "mobile"), opts(2, 3));
  f.catch_up(drv);
  EXPECT_TRUE(f.rule.background_limited());
  // The callbacks model keys by resource: both demands are one task, and
  // cancel ends it whole; nothing waits above the level afterwards.
  drv.cancel(high);
  f.catch_up(drv);
  EXPECT_FALSE(f.rule.background_limited());
}

}  // namespace
}  // namespace dfl::testing
