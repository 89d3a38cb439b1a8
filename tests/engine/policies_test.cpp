// The built-in orphan policies (policies/builtin.h) and their registry: each
// rule of the system it comes from, on hand-made views.
#include <gtest/gtest.h>

#include "demandflight/policies/builtin.h"
#include "demandflight/policies/registry.h"

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
