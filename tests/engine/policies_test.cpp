// The built-in orphan policies (policies/builtin.h) and their registry: each
// rule of the system it comes from, on hand-made views.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "demandflight/policies/builtin.h"
#include "demandflight/policies/expected_value.h"
#include "demandflight/policies/learned.h"
#include "demandflight/policies/registry.h"
#include "driver.h"

namespace dfl::testing {
namespace {

OrphanView view(std::uint64_t size, std::uint64_t done) {
  OrphanView v;
  v.size_bytes = size;
  v.bytes_done = done;
  v.bytes_remaining = size > done ? size - done : 0;
  return v;
}

OrphanDecision decide(const std::string& spec, const OrphanView& v) {
  return policies::make_orphan_policy(spec)->decide(v);
}

TEST(SimplePolicies, AlwaysAbortAlwaysCompleteAndKeepPartialAnswerTheSameToEveryView) {
  for (const OrphanView& v : {view(1'000'000, 0), view(1'000'000, 999'999), view(0, 5'000)}) {
    EXPECT_EQ(decide("always-abort", v), OrphanDecision::abort);
    EXPECT_EQ(decide("always-complete", v), OrphanDecision::complete);
    EXPECT_EQ(decide("keep-partial", v), OrphanDecision::keep_partial);
  }
}

// One separator for parameters everywhere: in a list, an item k=v belongs to
// the policy before it; the old ';' still works.
TEST(PolicySpecs, ListsSplitAtPoliciesAndParametersTakeCommasOrTheOldSemicolons) {
  using V = std::vector<std::string>;
  EXPECT_EQ(policies::split_policy_list("squid:pct=80,min_bytes=0,always-abort,keep-partial"),
            (V{"squid:pct=80,min_bytes=0", "always-abort", "keep-partial"}));
  EXPECT_EQ(policies::split_policy_list("squid:pct=80;min_bytes=0,always-abort"),
            (V{"squid:pct=80,min_bytes=0", "always-abort"}));
  EXPECT_EQ(policies::split_policy_list("learned:model=/a:b.json,squid,pct=5"),
            (V{"learned:model=/a:b.json", "squid:pct=5"}));
  EXPECT_THROW(policies::split_policy_list("pct=5,squid"), std::invalid_argument);
  const policies::PolicySpec old = policies::parse_policy_spec("squid:pct=80;min_bytes=0");
  const policies::PolicySpec now = policies::parse_policy_spec("squid:pct=80,min_bytes=0");
  EXPECT_EQ(old.params, now.params);
  EXPECT_EQ(now.params.at("min_bytes"), "0");
}

TEST(SquidPolicy, WithSquidsDefaultsOnlyTheLast16KiBAreWorthFinishing) {
  EXPECT_EQ(decide("squid", view(1'000'000, 1'000'000 - 16 * 1024)), OrphanDecision::complete);
  EXPECT_EQ(decide("squid", view(1'000'000, 1'000'000 - 16 * 1024 - 1)), OrphanDecision::abort);
  EXPECT_EQ(decide("squid", view(1'000'000, 990'000)), OrphanDecision::complete);
  EXPECT_EQ(decide("squid", view(100'000'000, 97'000'000)), OrphanDecision::abort)
      << "97% in, but 3 MB to go is more than quick_abort_max";
}

TEST(SquidPolicy, BetweenMinAndMaxThePercentageDecides) {
  const std::string spec = "squid:min_bytes=1000,max_bytes=10000000,pct=60";
  EXPECT_EQ(decide(spec, view(1'000'000, 600'000)), OrphanDecision::complete);
  EXPECT_EQ(decide(spec, view(1'000'000, 599'999)), OrphanDecision::abort);
  EXPECT_EQ(decide(spec, view(100'000'000, 80'000'000)), OrphanDecision::abort)
      << "more than max_bytes to go";
  EXPECT_EQ(decide(spec, view(100'000'000, 99'999'000)), OrphanDecision::complete)
      << "at most min_bytes to go";
}

TEST(SquidPolicy, NegativeMinFinishesEverythingZeroMinAndMaxAbortsEverything) {
  EXPECT_EQ(decide("squid:min_bytes=-1", view(1'000'000'000, 0)), OrphanDecision::complete);
  EXPECT_EQ(decide("squid:min_bytes=0,max_bytes=0", view(1'000'000, 999'999)),
            OrphanDecision::abort);
}

TEST(SquidPolicy, AnUnknownSizeIsAbortedAsSquidDoes) {
  EXPECT_EQ(decide("squid", view(0, 5'000)), OrphanDecision::abort);
  EXPECT_EQ(decide("squid:min_bytes=-1", view(0, 5'000)), OrphanDecision::abort)
      << "nothing can be judged without a length, not even 'finish everything'";
}

TEST(LowPriorityPolicy, CompletesUntilAQueuedTaskWaitsForTheSlot) {
  OrphanView v = view(1'000'000, 10);
  v.queued_tasks = 0;
  v.free_slots = 0;
  EXPECT_EQ(decide("low-priority", v), OrphanDecision::complete) << "nobody waits";
  v.queued_tasks = 3;
  v.free_slots = 1;
  EXPECT_EQ(decide("low-priority", v), OrphanDecision::complete) << "a slot is free";
  v.free_slots = 0;
  EXPECT_EQ(decide("low-priority", v), OrphanDecision::abort) << "it holds the slot they need";
}

// Remembers the views it was shown and gives one answer to all.
class RecordingPolicy final : public OrphanPolicy {
 public:
  explicit RecordingPolicy(OrphanDecision answer = OrphanDecision::complete) : answer_(answer) {}
  OrphanDecision decide(const OrphanView& view) override {
    views.push_back(view);
    return answer_;
  }
  OrphanDecision answer_;
  std::string_view name() const override { return "recording"; }
  bool uses_key_history() const override { return true; }
  std::vector<OrphanView> views;
};

TEST(OrphanView, ShowsTheQueueTheKeysHistoryAndTheCache) {
  auto policy = std::make_shared<RecordingPolicy>();
  SchedulerConfig c = Driver::small_config();
  c.max_transfers = 1;
  c.max_per_origin = 1;
  c.cache_bytes = 50'000;
  Driver drv(c, policy);
  // An installed artifact takes 1,000 of the cache's 50,000 bytes.
  DemandOptions small = opts(9, 1);
  small.size_bytes = 1'000;
  drv.subscribe(key("pebble"), small);
  drv.complete(key("pebble"));
  // rock is asked for at 1 s and at 3 s (the second demand joins), then runs
  // alone in the one slot while two others wait.
  DemandOptions rock = opts(1, 1);
  rock.size_bytes = 10'000;
  drv.at(1);
  const DemandHandle a = drv.subscribe(key("rock"), rock);
  drv.at(3);
  const DemandHandle b = drv.subscribe(key("rock"), rock);
  DemandOptions other = opts(2, 0);
  other.size_bytes = 7'000;
  drv.subscribe(key("stone"), other);
  other.size_bytes = 5'000;
  drv.subscribe(key("slate"), other);
  drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(key("rock")), 2'500);
  drv.at(4);
  drv.cancel(a);
  drv.cancel(b);  // rock is an orphan now.
  ASSERT_EQ(policy->views.size(), 1u);
  const OrphanView& v = policy->views[0];
  EXPECT_EQ(v.size_bytes, 10'000u);
  EXPECT_EQ(v.bytes_done, 2'500u);
  EXPECT_EQ(v.bytes_remaining, 7'500u);
  EXPECT_EQ(v.queued_tasks, 2u);
  EXPECT_EQ(v.queued_bytes, 12'000u);
  EXPECT_EQ(v.free_slots, 0u);
  EXPECT_EQ(v.key_demands, 2u);
  EXPECT_DOUBLE_EQ(v.since_last_demand_s, 1.0);
  ASSERT_TRUE(v.previous_gap_s.has_value());
  EXPECT_DOUBLE_EQ(*v.previous_gap_s, 2.0);
  EXPECT_EQ(v.cache_capacity_bytes, 50'000u);
  EXPECT_EQ(v.cache_used_bytes, 1'000u);
}

TEST(OrphanView, TheKeyHistoryIsBoundedAndKeepsTheMostRecentKeys) {
  auto policy = std::make_shared<RecordingPolicy>(OrphanDecision::abort);
  SchedulerConfig c = Driver::small_config();
  c.key_history_limit = 4;
  Driver drv(c, policy);
  // Many keys at one instant (times tie): the history still stays bounded.
  for (int i = 0; i < 40; ++i) {
    const DemandHandle h = drv.subscribe(key("k" + std::to_string(i)), opts(1, 0));
    drv.cancel(h);
  }
  const DemandHandle a = drv.subscribe(key("rock"), opts(1, 0));
  drv.cancel(a);
  ASSERT_EQ(policy->views.size(), 41u) << "every cancel orphaned a running transfer";
  EXPECT_EQ(policy->views.back().key_demands, 1u) << "the newest key is remembered";
  EXPECT_LE(drv.scheduler.remembered_keys(), 8u) << "at most twice the limit between prunes";
  EXPECT_GE(drv.scheduler.remembered_keys(), 4u);
}

TEST(OrphanView, NoHistoryIsKeptForAPolicyThatDoesNotReadIt) {
  Driver drv(Driver::small_config(),
             std::make_shared<policies::SquidPolicy>(policies::SquidPolicy::Params{}));
  drv.subscribe(key("rock"), opts(1, 0));
  EXPECT_EQ(drv.scheduler.remembered_keys(), 0u);
}

DemandOptions sized(OwnerId owner, Priority p, std::uint64_t size) {
  DemandOptions o = opts(owner, p);
  o.size_bytes = size;
  return o;
}

// --- expected-value ------------------------------------------------------------

OrphanView orphan_of(const ArtifactKey& k, double now, std::uint64_t size, std::uint64_t done) {
  OrphanView v = view(size, done);
  v.key = &k;
  v.now_s = now;
  return v;
}

TEST(ExpectedValuePolicy, WithNoHistoryItFinishesWhatIsMoreThanHalfIn) {
  auto policy = policies::make_orphan_policy("expected-value");
  const ArtifactKey a = key("world/cell_1/a.mesh");
  // No events yet: P(reuse) = 1/2, so complete iff 1/2 * size > remaining.
  EXPECT_EQ(policy->decide(orphan_of(a, 0, 1'000'000, 600'000)), OrphanDecision::complete);
  EXPECT_EQ(policy->decide(orphan_of(a, 0, 1'000'000, 400'000)), OrphanDecision::abort);
  // While a task waits for the slot, remaining bytes cost double (queue_weight=1).
  OrphanView blocked = orphan_of(a, 0, 1'000'000, 600'000);
  blocked.queued_tasks = 1;
  blocked.free_slots = 0;
  EXPECT_EQ(policy->decide(blocked), OrphanDecision::abort);
  blocked.bytes_done = 800'000;
  blocked.bytes_remaining = 200'000;
  EXPECT_EQ(policy->decide(blocked), OrphanDecision::complete);
}

TEST(ExpectedValuePolicy, LearnsReuseOnlineFromTheKeysClass) {
  policies::ExpectedValuePolicy reused_class({});
  policies::ExpectedValuePolicy unused_class({});
  const ArtifactKey a = key("world/cell_1/a.mesh");
  const ArtifactKey b = key("world/cell_1/b.mesh");
  const ArtifactKey other = key("ui/icon.png");
  EXPECT_DOUBLE_EQ(reused_class.reuse_probability(b), 0.5);
  // a is orphaned at 0 and asked for again at 10 s: reused within 60 s.
  reused_class.decide(orphan_of(a, 0, 1'000'000, 0));
  reused_class.observe_request(a, 10);
  // p_class = (1 + 1) / (1 + 2); b has no events of its own: p = p_class.
  EXPECT_DOUBLE_EQ(reused_class.reuse_probability(b), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(reused_class.reuse_probability(other), 0.5) << "another class learns nothing";
  EXPECT_EQ(reused_class.decide(orphan_of(b, 20, 1'000'000, 400'000)), OrphanDecision::complete)
      << "2/3 of the size is worth more than the 60% left";
  // a is orphaned at 0 and nobody asks within the horizon.
  unused_class.decide(orphan_of(a, 0, 1'000'000, 0));
  unused_class.observe_request(other, 100);  // Time passes: the event expires.
  EXPECT_DOUBLE_EQ(unused_class.reuse_probability(b), 1.0 / 3.0);
  EXPECT_EQ(unused_class.decide(orphan_of(b, 100, 1'000'000, 600'000)), OrphanDecision::abort)
      << "1/3 of the size is worth less than the 40% left";
  // A key's own events weigh against its class: a reused twice, b never.
  policies::ExpectedValuePolicy mixed({});
  for (double t : {0.0, 100.0}) {
    mixed.decide(orphan_of(a, t, 1'000'000, 0));
    mixed.observe_request(a, t + 1);
  }
  EXPECT_GT(mixed.reuse_probability(a), mixed.reuse_probability(b));
}

TEST(ExpectedValuePolicy, AnUnknownSizeIsAbortedAndKeepKeepsThePartial) {
  const ArtifactKey a = key("data/a.pak");
  EXPECT_EQ(decide("expected-value", orphan_of(a, 0, 0, 5'000)), OrphanDecision::abort);
  EXPECT_EQ(decide("expected-value:keep=1", orphan_of(a, 0, 1'000'000, 100)),
            OrphanDecision::keep_partial);
  EXPECT_EQ(decide("expected-value:keep=1", orphan_of(a, 0, 1'000'000, 999'000)),
            OrphanDecision::complete);
}

TEST(ExpectedValuePolicy, TheEngineShowsItEveryRequest) {
  // In the engine: a re-asked orphaned key raises P(reuse) for its class.
  auto policy = std::make_shared<policies::ExpectedValuePolicy>(
      policies::ExpectedValuePolicy::Params{});
  Driver drv(Driver::small_config(), policy);
  const ArtifactKey a = key("world/cell_1/a.mesh");
  drv.cancel(drv.subscribe(a, sized(1, 0, 1'000'000)));  // Orphaned, aborted at 0% in.
  drv.at(5);
  drv.subscribe(a, sized(1, 0, 1'000'000));
  EXPECT_DOUBLE_EQ(policy->reuse_probability(key("world/cell_1/b.mesh")), 2.0 / 3.0);
}

// --- learned ---------------------------------------------------------------------

// A model that ignores every feature: P(reuse) = sigmoid(bias).
policies::LearnedModel constant_model(double p) {
  policies::LearnedModel m;
  m.scale.fill(1);
  m.weights[0] = std::log(p / (1 - p));
  return m;
}

TEST(LearnedPolicy, DecidesLikeExpectedValueWithTheLearnedProbability) {
  policies::LearnedPolicy policy(constant_model(0.8), {});
  const ArtifactKey a = key("data/a.pak");
  EXPECT_NEAR(policy.reuse_probability(orphan_of(a, 0, 1'000'000, 0)), 0.8, 1e-12);
  // Complete iff 0.8 * size > remaining.
  EXPECT_EQ(policy.decide(orphan_of(a, 0, 1'000'000, 201'000)), OrphanDecision::complete);
  EXPECT_EQ(policy.decide(orphan_of(a, 0, 1'000'000, 199'000)), OrphanDecision::abort);
  OrphanView blocked = orphan_of(a, 0, 1'000'000, 201'000);
  blocked.queued_tasks = 2;
  EXPECT_EQ(policy.decide(blocked), OrphanDecision::abort) << "a task waits: remaining counts double";
  policies::LearnedPolicy keep(constant_model(0.8), {1, true});
  EXPECT_EQ(keep.decide(orphan_of(a, 0, 1'000'000, 100'000)), OrphanDecision::keep_partial);
}

TEST(LearnedPolicy, FeaturesAreComputedFromTheView) {
  const ArtifactKey a = key("data/a.pak");
  OrphanView v = orphan_of(a, 10, 4'000'000, 1'000'000);
  v.key_demands = 3;
  v.since_last_demand_s = 2;
  v.previous_gap_s = 30;
  v.queued_tasks = 1;
  v.free_slots = 0;
  v.cache_capacity_bytes = 100;
  v.cache_used_bytes = 25;
  const policies::Features f = policies::learned_features(v, 0.75, 60);
  EXPECT_EQ(f[0], 1);
  EXPECT_DOUBLE_EQ(f[1], std::log1p(4.0));
  EXPECT_DOUBLE_EQ(f[2], 0.25);
  EXPECT_DOUBLE_EQ(f[3], std::log1p(3.0));
  EXPECT_DOUBLE_EQ(f[4], std::log1p(2.0));
  EXPECT_EQ(f[5], 1) << "the previous gap is within the horizon";
  EXPECT_EQ(f[6], 1) << "blocked";
  EXPECT_DOUBLE_EQ(f[7], std::log1p(1.0));
  EXPECT_DOUBLE_EQ(f[8], 0.25);
  EXPECT_DOUBLE_EQ(f[9], std::log(3.0));
}

TEST(LearnedPolicy, TheFitRecoversWhichFeatureCarriesTheSignal) {
  const std::uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
  std::printf("LearnedPolicy fit: seed %llu (--gtest_random_seed=%llu reproduces it)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  std::vector<policies::Features> x;
  std::vector<bool> y;
  // Reuse depends on log_key_demands (feature 3) alone; the others are noise.
  for (int i = 0; i < 4000; ++i) {
    policies::Features f{};
    f[0] = 1;
    for (std::size_t j = 1; j < f.size(); ++j)
      f[j] = noise(rng);
    const double p = 1 / (1 + std::exp(-(2.0 * f[3] - 0.5)));
    x.push_back(f);
    y.push_back(std::uniform_real_distribution<double>(0, 1)(rng) < p);
  }
  const policies::LearnedModel m = policies::fit_logistic(x, y, 60);
  EXPECT_EQ(m.examples, 4000u);
  EXPECT_NEAR(m.weights[3], 2.0, 0.3);
  for (std::size_t j : {1u, 2u, 4u, 5u, 6u, 7u, 8u, 9u})
    EXPECT_LT(std::abs(m.weights[j]), 0.25) << "feature " << j << " is noise";
  EXPECT_LT(m.train_log_loss, 0.6);
  // The JSON round trip keeps the model.
  const std::string path = ::testing::TempDir() + "/learned-model.json";
  std::ofstream(path) << m.to_json();
  const policies::LearnedModel back = policies::LearnedModel::load(path);
  for (std::size_t j = 0; j < policies::kLearnedFeatures; ++j)
    EXPECT_DOUBLE_EQ(back.weights[j], m.weights[j]);
  EXPECT_DOUBLE_EQ(back.probability(x[0]), m.probability(x[0]));
}

TEST(LearnedPolicy, ABadModelFileIsRefusedNamingTheField) {
  const std::string path = ::testing::TempDir() + "/bad-model.json";
  auto refused = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      policies::make_orphan_policy("learned:model=" + path);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused("{").find("not JSON"), std::string::npos);
  EXPECT_NE(refused(R"({"format": "other"})").find(": format:"), std::string::npos);
  policies::LearnedModel m = constant_model(0.5);
  auto j = nlohmann::json::parse(m.to_json());
  j["scale"][2] = 0;
  EXPECT_NE(refused(j.dump()).find("scale[2]: must be positive"), std::string::npos);
  j = nlohmann::json::parse(m.to_json());
  j["features"][4] = "something_else";
  EXPECT_NE(refused(j.dump()).find("features"), std::string::npos);
  EXPECT_EQ(refused(m.to_json()), "accepted") << "a well-formed model loads";
  EXPECT_THROW(policies::make_orphan_policy("learned"), std::invalid_argument)
      << "model= is required";
}

// --- keep_partial: the engine keeps the offset past the task ------------------

TEST(KeepPartial, TheNextTaskOfTheKeyResumesFromTheKeptOffset) {
  Driver drv(Driver::small_config(), std::make_shared<policies::KeepPartialPolicy>());
  const DemandHandle a = drv.subscribe(key("rock"), sized(1, 0, 10'000));
  drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(key("rock")), 4'000);
  drv.at(1);
  drv.cancel(a);
  ASSERT_EQ(drv.aborted.size(), 1u);
  EXPECT_TRUE(drv.aborted[0].keep_partial);
  EXPECT_EQ(drv.aborted[0].kept_bytes, 4'000u);
  EXPECT_EQ(drv.scheduler.kept_partial(key("rock")), 4'000u);
  EXPECT_FALSE(drv.scheduler.task_for(key("rock")).has_value()) << "the task itself ended";

  drv.at(2);
  drv.subscribe(key("rock"), sized(2, 0, 10'000));
  ASSERT_EQ(drv.started.size(), 2u);
  EXPECT_EQ(drv.started[1].attempt, 1u);
  EXPECT_EQ(drv.started[1].resume_offset_bytes, 4'000u) << "the kept bytes are not fetched again";
  EXPECT_FALSE(drv.scheduler.kept_partial(key("rock")).has_value()) << "taken over by the task";
  EXPECT_EQ(drv.scheduler.stats().partials_resumed, 1u);
  // Other keys, and other revisions of the resource, start from zero.
  drv.subscribe(ArtifactKey{"rock", "r2", "pc", 0}, sized(2, 0, 10'000));
  ASSERT_EQ(drv.started.size(), 3u);
  EXPECT_EQ(drv.started[2].resume_offset_bytes, 0u);
}

TEST(KeepPartial, ResumedBytesAddUpAcrossTasksAndTheInstallSucceeds) {
  Driver drv(Driver::small_config(), std::make_shared<policies::KeepPartialPolicy>());
  DemandHandle h = drv.subscribe(key("rock"), sized(1, 0, 10'000));
  drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(key("rock")), 3'000);
  drv.cancel(h);
  h = drv.subscribe(key("rock"), sized(1, 0, 10'000));
  drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(key("rock")), 2'000);
  drv.cancel(h);
  EXPECT_EQ(drv.scheduler.kept_partial(key("rock")), 5'000u) << "3,000 resumed + 2,000 more";
  h = drv.subscribe(key("rock"), sized(1, 0, 10'000));
  EXPECT_EQ(drv.started.back().resume_offset_bytes, 5'000u);
  drv.finish_transfer(key("rock"), TransferStatus::ok, 5'000);
  drv.finish_finalize(key("rock"));
  EXPECT_EQ(drv.outcome(h), DemandOutcome::succeeded);
  EXPECT_TRUE(drv.dropped_partials.empty()) << "every kept byte was used";
}

TEST(KeepPartial, NothingReceivedIsAPlainAbort) {
  Driver drv(Driver::small_config(), std::make_shared<policies::KeepPartialPolicy>());
  drv.cancel(drv.subscribe(key("rock"), sized(1, 0, 10'000)));
  ASSERT_EQ(drv.aborted.size(), 1u);
  EXPECT_FALSE(drv.aborted[0].keep_partial);
  EXPECT_EQ(drv.aborted[0].kept_bytes, 0u);
  EXPECT_EQ(drv.scheduler.kept_partial_bytes(), 0u);
}

TEST(KeepPartial, TheBudgetDropsTheOldestPartialFirst) {
  SchedulerConfig c = Driver::small_config();
  c.partial_bytes = 10'000;
  c.max_partials = 8;
  Driver drv(c, std::make_shared<policies::KeepPartialPolicy>());
  auto keep = [&](const char* name, std::uint64_t bytes) {
    const DemandHandle h = drv.subscribe(key(name), sized(1, 0, 100'000));
    drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(key(name)), bytes);
    drv.at(drv.now + 1);
    drv.cancel(h);
  };
  keep("a", 4'000);
  keep("b", 4'000);
  EXPECT_TRUE(drv.dropped_partials.empty());
  keep("c", 4'000);  // 12,000 > 10,000: a, the oldest, goes.
  ASSERT_EQ(drv.dropped_partials.size(), 1u);
  EXPECT_EQ(drv.dropped_partials[0].key, key("a"));
  EXPECT_EQ(drv.dropped_partials[0].bytes, 4'000u);
  EXPECT_EQ(drv.scheduler.kept_partial_bytes(), 8'000u);
  keep("d", 20'000);  // Larger than the whole budget: not kept, nothing else dropped.
  EXPECT_FALSE(drv.aborted.back().keep_partial);
  EXPECT_EQ(drv.dropped_partials.size(), 1u);
  // The count limit too.
  SchedulerConfig one = c;
  one.max_partials = 1;
  Driver single(one, std::make_shared<policies::KeepPartialPolicy>());
  for (const char* name : {"x", "y"}) {
    const DemandHandle h = single.subscribe(key(name), sized(1, 0, 100'000));
    single.scheduler.on_transfer_progress(single.now, single.transfer_of(key(name)), 100);
    single.cancel(h);
  }
  ASSERT_EQ(single.dropped_partials.size(), 1u);
  EXPECT_EQ(single.dropped_partials[0].key, key("x"));
  EXPECT_EQ(single.scheduler.kept_partial(key("y")), 100u);
}

TEST(KeepPartial, AnInstallOfTheKeyDropsItsPartial) {
  SchedulerConfig c = Driver::small_config();
  c.model = Model::independent;  // Two tasks of one key.
  Driver drv(c, std::make_shared<policies::KeepPartialPolicy>());
  const DemandHandle a = drv.subscribe(key("rock"), sized(1, 0, 10'000));
  const TransferId first = drv.started.back().transfer;
  const DemandHandle b = drv.subscribe(key("rock"), sized(2, 0, 10'000));
  const TransferId second = drv.started.back().transfer;
  drv.scheduler.on_transfer_progress(drv.now, first, 4'000);
  drv.cancel(a);
  EXPECT_EQ(drv.scheduler.kept_partial(key("rock")), 4'000u);
  drv.finish_transfer(second, TransferStatus::ok, 10'000);
  drv.finish_finalize(key("rock"));
  EXPECT_EQ(drv.outcome(b), DemandOutcome::succeeded);
  ASSERT_EQ(drv.dropped_partials.size(), 1u);
  EXPECT_EQ(drv.dropped_partials[0].bytes, 4'000u);
  EXPECT_FALSE(drv.scheduler.kept_partial(key("rock")).has_value());
}

TEST(KeepPartial, TheViewShowsThePartialBudget) {
  auto policy = std::make_shared<RecordingPolicy>(OrphanDecision::keep_partial);
  SchedulerConfig c = Driver::small_config();
  c.partial_bytes = 50'000;
  Driver drv(c, policy);
  DemandHandle h = drv.subscribe(key("a"), sized(1, 0, 10'000));
  drv.scheduler.on_transfer_progress(drv.now, drv.transfer_of(key("a")), 1'500);
  drv.cancel(h);
  h = drv.subscribe(key("b"), sized(1, 0, 10'000));
  drv.cancel(h);
  ASSERT_EQ(policy->views.size(), 2u);
  EXPECT_EQ(policy->views[1].partial_capacity_bytes, 50'000u);
  EXPECT_EQ(policy->views[1].partial_used_bytes, 1'500u);
}

TEST(PolicyRegistry, BadSpecsAreRefusedWithWhatIsAccepted) {
  auto message = [](const std::string& spec) {
    try {
      policies::make_orphan_policy(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("squid:pct=150").find("out of range"), std::string::npos);
  EXPECT_NE(message("squid:pct=abc").find("not a number"), std::string::npos);
  EXPECT_NE(message("squid:minbytes=3").find("accepted: min_bytes, max_bytes, pct"),
            std::string::npos);
  EXPECT_NE(message("low-priority:x=1").find("takes no parameters"), std::string::npos);
  EXPECT_NE(message("nope").find("squid"), std::string::npos) << "the known names are listed";
  EXPECT_EQ(message("squid:min_bytes=0,max_bytes=1048576,pct=90"), "accepted");
}

}  // namespace
}  // namespace dfl::testing

namespace dfl::testing {
namespace {

// Ski rental's break-even rule on the engine's clock: orphaned at t = 1 with
// 400 of 1000 bytes (400 B/s), it keeps renting and asks to be asked again
// when 400 more should be in (t = 2); asked then with 800 in, it stops.
TEST(SkiRental, StopsWhenTheBytesSinceTheOrphaningEqualThoseItHadThen) {
  Driver drv(Driver::one_slot(), policies::make_orphan_policy("ski-rental"));
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 2));
  drv.scheduler.on_transfer_progress(1.0, drv.transfer_of(rock), 400);
  drv.at(1.0);
  drv.cancel(a);
  ASSERT_EQ(drv.orphan_decisions.size(), 1u);
  EXPECT_EQ(drv.orphan_decisions[0].decision, OrphanDecision::complete);
  ASSERT_TRUE(drv.scheduler.next_wakeup_s());
  EXPECT_DOUBLE_EQ(*drv.scheduler.next_wakeup_s(), 2.0);
  drv.scheduler.on_transfer_progress(1.5, drv.transfer_of(rock), 600);
  drv.tick(1.5);
  EXPECT_TRUE(drv.aborted.empty()) << "nothing due yet";
  drv.scheduler.on_transfer_progress(1.99, drv.transfer_of(rock), 799);
  drv.tick(2.0);
  // 399 since: one byte short, at 799/1.99 B/s it asks again ~2.5 ms later.
  EXPECT_TRUE(drv.aborted.empty());
  ASSERT_TRUE(drv.scheduler.next_wakeup_s());
  EXPECT_GT(*drv.scheduler.next_wakeup_s(), 2.0);
  EXPECT_LT(*drv.scheduler.next_wakeup_s(), 2.01);
  drv.scheduler.on_transfer_progress(2.005, drv.transfer_of(rock), 801);
  drv.tick(2.01);
  ASSERT_EQ(drv.aborted.size(), 1u);
  EXPECT_FALSE(drv.scheduler.task_for(rock));
  EXPECT_EQ(drv.orphan_decisions.back().decision, OrphanDecision::abort);
  EXPECT_FALSE(drv.orphan_decisions.back().first_decision);
  EXPECT_FALSE(drv.scheduler.next_wakeup_s()) << "its re-ask is gone with it";
  drv.scheduler.check_invariants();
}

// A transfer that ends first installs; a demand that comes back first
// re-attaches; either way the re-ask is disarmed.
TEST(SkiRental, AnOrphanThatCompletesOrIsWantedAgainFirstIsNotStopped) {
  Driver drv(Driver::one_slot(), policies::make_orphan_policy("ski-rental"));
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 2));
  drv.scheduler.on_transfer_progress(1.0, drv.transfer_of(rock), 600);
  drv.at(1.0);
  drv.cancel(a);
  ASSERT_TRUE(drv.scheduler.next_wakeup_s());
  drv.at(1.2);
  const DemandHandle back = drv.subscribe(rock, opts(2, 1));
  EXPECT_FALSE(drv.scheduler.next_wakeup_s()) << "re-attached: nobody asks again";
  drv.scheduler.check_invariants();
  drv.cancel(back);  // Orphaned again at 1.2: a new price.
  ASSERT_TRUE(drv.scheduler.next_wakeup_s());
  drv.complete(rock);
  EXPECT_TRUE(drv.aborted.empty());
  EXPECT_EQ(drv.task_ends.back().outcome, TaskOutcome::installed);
  EXPECT_FALSE(drv.scheduler.next_wakeup_s());
  // With nothing received there is nothing to lose: stopped at once.
  const DemandHandle c = drv.subscribe(key("grass"), opts(3, 1));
  drv.cancel(c);
  EXPECT_EQ(drv.aborted.size(), 1u);
}

// The randomized rule stops at z x the price, z with density e^z / (e - 1)
// on [0, 1]: read back from when it asks to be asked again (at 1000 B/s
// with a price of 1000 bytes, after z seconds).
TEST(SkiRental, TheRandomizedThresholdHasTheDensityOfKarlinEtAl) {
  auto draws = [](std::uint64_t seed) {
    auto policy = policies::make_orphan_policy("ski-rental-random:seed=" + std::to_string(seed));
    std::vector<double> z;
    for (int i = 0; i < 20000; ++i) {
      const ArtifactKey k = key("k" + std::to_string(i));
      OrphanView v;
      v.key = &k;
      v.size_bytes = 1'000'000;
      v.bytes_done = 1000;
      v.bytes_remaining = 999'000;
      v.throughput_Bps = 1000;
      v.elapsed_s = 1;
      if (policy->decide(v) != OrphanDecision::complete) {
        z.push_back(0);  // A draw below the first byte.
        continue;
      }
      z.push_back(*policy->ask_again_at_s(v));
    }
    return z;
  };
  const std::vector<double> z = draws(7);
  double mean = 0;
  for (double x : z) {
    ASSERT_GE(x, 0.0);
    ASSERT_LE(x, 1.0);
    mean += x / static_cast<double>(z.size());
  }
  EXPECT_NEAR(mean, 1 / (std::exp(1.0) - 1), 0.01);  // E[z] = 1 / (e - 1) = 0.582.
  // Kolmogorov-Smirnov against F(z) = (e^z - 1) / (e - 1): 1.63 / sqrt(n) at 1%.
  std::vector<double> sorted = z;
  std::sort(sorted.begin(), sorted.end());
  double d = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const double f = std::expm1(sorted[i]) / (std::exp(1.0) - 1);
    d = std::max({d, std::abs(f - static_cast<double>(i) / static_cast<double>(sorted.size())),
                  std::abs(f - static_cast<double>(i + 1) / static_cast<double>(sorted.size()))});
  }
  EXPECT_LT(d, 1.63 / std::sqrt(static_cast<double>(sorted.size())));
  EXPECT_EQ(draws(7), z) << "seeded: the same draws";
  EXPECT_NE(draws(8), z);
}

// linger: the orphan runs delay_s; a demand back within it re-attaches, one
// that is not is stopped exactly at the end (`then`).
TEST(Linger, KeepsTheOrphanForItsDelayThenDecidesThen) {
  Driver drv(Driver::small_config(), policies::make_orphan_policy("linger:delay_s=0.1"));
  const ArtifactKey rock = key("rock");
  const DemandHandle a = drv.subscribe(rock, opts(1, 2));
  drv.at(1.0);
  drv.cancel(a);
  EXPECT_DOUBLE_EQ(*drv.scheduler.next_wakeup_s(), 1.1);
  drv.at(1.05);
  const DemandHandle back = drv.subscribe(rock, opts(2, 1));
  EXPECT_TRUE(drv.aborted.empty());
  EXPECT_FALSE(drv.scheduler.next_wakeup_s());
  drv.at(2.0);
  drv.cancel(back);
  drv.tick(2.05);
  EXPECT_TRUE(drv.aborted.empty());
  drv.tick(2.1);
  ASSERT_EQ(drv.aborted.size(), 1u);
  EXPECT_FALSE(drv.aborted[0].keep_partial);

  Driver keep(Driver::small_config(),
              policies::make_orphan_policy("linger:delay_s=0.5,then=keep_partial"));
  const DemandHandle b = keep.subscribe(rock, opts(1, 2));
  keep.scheduler.on_transfer_progress(0.5, keep.transfer_of(rock), 300);
  keep.at(0.5);
  keep.cancel(b);
  keep.tick(1.0);
  ASSERT_EQ(keep.aborted.size(), 1u);
  EXPECT_TRUE(keep.aborted[0].keep_partial);
  EXPECT_EQ(keep.aborted[0].kept_bytes, 300u);
  EXPECT_THROW(policies::make_orphan_policy("linger:then=maybe"), std::invalid_argument);

  // Independent downloads: two orphans of one key linger each for their own delay.
  SchedulerConfig independent = Driver::small_config();
  independent.model = Model::independent;
  Driver two(independent, policies::make_orphan_policy("linger:delay_s=0.1"));
  const DemandHandle first = two.subscribe(rock, opts(1, 2));
  const DemandHandle second = two.subscribe(rock, opts(2, 2));
  two.cancel(first);
  two.at(0.05);
  two.cancel(second);
  two.tick(0.1);
  ASSERT_EQ(two.aborted.size(), 1u) << "the first at 0.1";
  two.tick(0.12);
  EXPECT_EQ(two.aborted.size(), 1u) << "the second not before 0.15";
  two.tick(0.05 + 0.1);  // 0.15000000000000002: its own end, not 0.15.
  EXPECT_EQ(two.aborted.size(), 2u);
  EXPECT_THROW(policies::make_orphan_policy("ski-rental:stop=complete"), std::invalid_argument);
}

}  // namespace
}  // namespace dfl::testing
