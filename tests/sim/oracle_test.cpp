// The oracle policy on hand-built views over a hand-written trace: it reads
// the trace's future (no simulation runs here).
#include <gtest/gtest.h>

#include <sstream>

#include "cli_runner.h"
#include "demandflight/sim/oracle.h"

namespace dfl::testing {
namespace {

// a (1 MB) is asked for at 0 and again at 3 (that demand cancelled at
// `cancel_d4`, if given); b and c (600 kB each) in between; b never again.
format::Trace trace_with_cache(std::uint64_t cache_bytes, const std::string& cancel_d4 = "") {
  std::string text =
      header(R"({"max_transfers": 2, "max_per_origin": 2, "cache_bytes": )" +
             std::to_string(cache_bytes) + "}") +
      artifact("a", 1'000'000) + artifact("b", 600'000) + artifact("c", 600'000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "a", "priority": 1})"
      "\n"
      R"({"op": "subscribe", "t": 1, "demand": "d2", "owner": "o", "artifact": "b", "priority": 1})"
      "\n"
      R"({"op": "subscribe", "t": 2, "demand": "d3", "owner": "o", "artifact": "c", "priority": 1})"
      "\n"
      R"({"op": "subscribe", "t": 3, "demand": "d4", "owner": "o", "artifact": "a", "priority": 1})"
      "\n";
  if (!cancel_d4.empty()) {
    text += R"({"op": "cancel", "t": )" + cancel_d4 + R"(, "demand": "d4"})" + "\n";
  }
  std::istringstream in(text);
  return format::read_trace(in, "oracle-test");
}

OrphanView view_of(const ArtifactKey& key, double now, std::uint64_t done, double rate,
                   std::uint64_t cache_bytes) {
  OrphanView v;
  v.key = &key;
  v.now_s = now;
  v.size_bytes = 1'000'000;
  v.bytes_done = done;
  v.bytes_remaining = 1'000'000 - done;
  v.throughput_Bps = rate;
  v.cache_capacity_bytes = cache_bytes;
  return v;
}

TEST(LookaheadPolicy, CompletesWhatIsAskedForAgainBeforeLruWouldEvictIt) {
  const format::Trace roomy = trace_with_cache(3'000'000);
  sim::LookaheadPolicy oracle(roomy);
  const ArtifactKey& a = roomy.artifacts[0].key;
  oracle.observe_request(a, 0);  // d1: a's next request is d4 at 3 s.
  EXPECT_EQ(oracle.next_request_s(a), 3.0);
  EXPECT_EQ(oracle.decide(view_of(a, 0.5, 500'000, 1e6, 3'000'000)), OrphanDecision::complete);
  // 1.2 MB of b and c come in between: with 1.5 MB of cache, a would be gone.
  const format::Trace tight = trace_with_cache(1'500'000);
  sim::LookaheadPolicy tight_oracle(tight);
  tight_oracle.observe_request(tight.artifacts[0].key, 0);
  EXPECT_EQ(tight_oracle.decide(view_of(tight.artifacts[0].key, 0.5, 500'000, 1e6, 1'500'000)),
            OrphanDecision::keep_partial)
      << "asked for again, but evicted first: the partial is what can be saved";
}

TEST(LookaheadPolicy, AbortsWhatIsNeverAskedForAgain) {
  const format::Trace trace = trace_with_cache(3'000'000);
  sim::LookaheadPolicy oracle(trace);
  oracle.observe_request(trace.artifacts[0].key, 0);
  oracle.observe_request(trace.artifacts[1].key, 1);  // d2: b's only request.
  EXPECT_FALSE(oracle.next_request_s(trace.artifacts[1].key).has_value());
  EXPECT_EQ(oracle.decide(view_of(trace.artifacts[1].key, 1.5, 100'000, 1e6, 3'000'000)),
            OrphanDecision::abort);
  oracle.observe_request(trace.artifacts[2].key, 2);
  oracle.observe_request(trace.artifacts[0].key, 3);  // d4: a is never asked for again either.
  EXPECT_EQ(oracle.decide(view_of(trace.artifacts[0].key, 3.5, 100'000, 1e6, 3'000'000)),
            OrphanDecision::abort);
}

TEST(LookaheadPolicy, CompletesOnlyWhenThatSavesMoreThanItCosts) {
  // d4 is cancelled 0.1 s after it asks: at 1 MB/s it would have fetched
  // 100 kB, less than the 500 kB completing costs now.
  const format::Trace trace = trace_with_cache(3'000'000, "3.1");
  sim::LookaheadPolicy oracle(trace);
  const ArtifactKey& a = trace.artifacts[0].key;
  oracle.observe_request(a, 0);
  EXPECT_EQ(oracle.decide(view_of(a, 0.5, 500'000, 1e6, 3'000'000)), OrphanDecision::keep_partial);
  // 50 kB left costs less than the 100 kB it saves.
  EXPECT_EQ(oracle.decide(view_of(a, 0.5, 950'000, 1e6, 3'000'000)), OrphanDecision::complete);
}

// An owner that comes and goes ends many times: the end that ends a demand is
// the first at or after its subscribe that covers its generation.
TEST(LookaheadPolicy, ReadsWhenTheNextDemandEndsFromItsOwnersFirstCoveringEnd) {
  const std::string text =
      header(R"({"max_transfers": 2, "max_per_origin": 2, "cache_bytes": 3000000})") +
      artifact("a", 1'000'000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "a", "priority": 1})"
      "\n"
      R"({"op": "end_owner", "t": 0.5, "owner": "s", "owner_generation": 4})"
      "\n"
      R"({"op": "subscribe", "t": 1, "demand": "d2", "owner": "s", "artifact": "a", "priority": 1, "owner_generation": 5})"
      "\n"
      R"({"op": "end_owner", "t": 1.05, "owner": "s", "owner_generation": 2})"
      "\n"
      R"({"op": "end_owner", "t": 1.1, "owner": "s"})"
      "\n"
      R"({"op": "end_owner", "t": 1.2, "owner": "s"})"
      "\n";
  std::istringstream in(text);
  const format::Trace trace = format::read_trace(in, "oracle-owner-ends");
  sim::LookaheadPolicy oracle(trace);
  const ArtifactKey& a = trace.artifacts[0].key;
  oracle.observe_request(a, 0);
  // d2 ends at 1.1 (not at 0.5: before it; not at 1.05: generation 2 < 5), so
  // at 1 MB/s it would fetch 100 kB itself: completing 500 kB does not pay,
  // completing 50 kB does.
  EXPECT_EQ(oracle.decide(view_of(a, 0.5, 500'000, 1e6, 3'000'000)), OrphanDecision::keep_partial);
  EXPECT_EQ(oracle.decide(view_of(a, 0.5, 950'000, 1e6, 3'000'000)), OrphanDecision::complete);
}

TEST(LookaheadPolicy, LetsTheSlotGoWhenADemandWaitsAndTheKeyComesBackLater) {
  const format::Trace trace = trace_with_cache(3'000'000);
  sim::LookaheadPolicy oracle(trace);
  const ArtifactKey& a = trace.artifacts[0].key;
  oracle.observe_request(a, 0);
  OrphanView v = view_of(a, 0.5, 500'000, 100'000, 3'000'000);  // 5 s to go at 100 kB/s.
  v.queued_tasks = 1;
  v.free_slots = 0;
  EXPECT_EQ(oracle.decide(v), OrphanDecision::complete)
      << "d4 asks at 3 s, before the rest lands at 5.5 s: it would wait for this transfer anyway";
  v.throughput_Bps = 1e6;  // The rest would land at 1 s, long before d4 asks at 3 s.
  EXPECT_EQ(oracle.decide(v), OrphanDecision::keep_partial) << "the waiting demand gets the slot";
  v.queued_tasks = 0;  // Nobody waits: finish it.
  EXPECT_EQ(oracle.decide(v), OrphanDecision::complete);
}

}  // namespace
}  // namespace dfl::testing
