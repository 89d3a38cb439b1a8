// describe(): every figure of a small hand-written trace, computed by hand in
// the comments (docs/cli.md, "Describing a trace", has the definitions).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "demandflight/format/describe.h"

namespace dfl::testing {
namespace {

format::Trace parse(const std::string& text) {
  std::istringstream in(text);
  return format::read_trace(in, "hand.jsonl");
}

std::string artifact(const std::string& id, const std::string& resource, int size) {
  return R"({"op": "artifact", "id": ")" + id + R"(", "resource": ")" + resource +
         R"(", "revision": "r1", "target": "pc", "generation": 0, "size": )" +
         std::to_string(size) + R"(, "origin": "cdn"})" + "\n";
}

std::string subscribe(double t, const std::string& demand, const std::string& owner,
                      const std::string& artifact_id, int priority, const std::string& extra = "") {
  std::ostringstream s;
  s << R"({"op": "subscribe", "t": )" << t << R"(, "demand": ")" << demand << R"(", "owner": ")"
    << owner << R"(", "artifact": ")" << artifact_id << R"(", "priority": )" << priority << extra
    << "}\n";
  return s.str();
}

// The platform: client 1000 B/s + 0.5 s, origin cdn 2000 B/s + 0.5 s, and the
// cm02 model (no factors, no connections), so a lone transfer of S bytes takes
// S / min(1000, 2000) + 0.5 + 0.5 = S/1000 + 1 s:
// key A (1000 B) 2 s, B (2000 B) 3 s, C (3000 B) 4 s.
//
// Keys: A is named by two ids, "a" and "a2" (one key: resource a@r1/pc#0);
// "unused" is declared and never requested. Requests, by subscribe ordinal:
//   [0] t=0    d1  u1 A (a)   p1   window [0, 2)
//   [1] t=1    d2  u2 A (a2)  p1   window [1, 3)        inside d1's: single flight
//   [2] t=1    d3  u1 B       p2   window [1, 4), cancelled at 2 -> [1, 2): in flight
//   [3] t=3    d4  u3 C       p1   window [3, 7), u3 ended at 5 -> [3, 5): in flight
//   [4] t=4    d5  u2 B       p0   window [4, 7)         d3's ended at 2: no
//   [5] t=6    d6  u1 A       p1   window [6, 8)         A's latest end 3: no
//   [6] t=6.5  d7  u2 A       p1   window [6.5, 8.5)     inside d6's: single flight
//   [7] t=7    d8  u1 B       p1   window [7, 10)        d5's ends at 7, exclusive: no
//   [8] t=8    d9  u3 C       p1   window [8, 12)        d4's ended at 5: no
//   [9] t=9    d10 u1 A (a2)  p1   timeout 0.5: [9, 9.5) A's latest end 8.5: no
//   [10] t=9.2 d11 u2 A       p1   window [9.2, 11.2)    inside d10's: single flight
// and: set_priority d4 1 -> 3 at 3.5 (a raise), set_priority d8 1 -> 0 at 7.5
// (a lower), cancel d10 at 9.6 (after its timeout at 9.5: not in flight).
std::string hand_trace() {
  return std::string(R"({"format": "demandflight-trace", "version": 1, "name": "hand", "seed": 1, )"
                     R"("platform": {"network_model": "cm02", "client_bandwidth_Bps": 1000, "client_latency_s": 0.5, )"
                     R"("origins": {"cdn": {"bandwidth_Bps": 2000, "latency_s": 0.5}}}})") +
         "\n" + artifact("a", "a", 1000) + artifact("a2", "a", 1000) + artifact("b", "b", 2000) +
         artifact("c", "c", 3000) + artifact("unused", "u", 5000) +
         subscribe(0, "d1", "u1", "a", 1) + subscribe(1, "d2", "u2", "a2", 1) +
         subscribe(1, "d3", "u1", "b", 2) + R"({"op": "cancel", "t": 2, "demand": "d3"})" + "\n" +
         subscribe(3, "d4", "u3", "c", 1) +
         R"({"op": "set_priority", "t": 3.5, "demand": "d4", "priority": 3})" + "\n" +
         subscribe(4, "d5", "u2", "b", 0) + R"({"op": "end_owner", "t": 5, "owner": "u3"})" + "\n" +
         subscribe(6, "d6", "u1", "a", 1) + subscribe(6.5, "d7", "u2", "a", 1) +
         subscribe(7, "d8", "u1", "b", 1) +
         R"({"op": "set_priority", "t": 7.5, "demand": "d8", "priority": 0})" + "\n" +
         subscribe(8, "d9", "u3", "c", 1) +
         subscribe(9, "d10", "u1", "a2", 1, R"(, "timeout_s": 0.5)") +
         subscribe(9.2, "d11", "u2", "a", 1) + R"({"op": "cancel", "t": 9.6, "demand": "d10"})" +
         "\n";
}

TEST(Describe, CountsOfAHandWrittenTrace) {
  const format::Description d = format::describe(parse(hand_trace()));
  EXPECT_EQ(d.trace, "hand");
  EXPECT_EQ(d.requests, 11u);
  EXPECT_EQ(d.keys, 3u);  // A (a and a2), B, C; "unused" is never requested.
  EXPECT_EQ(d.artifact_ids, 5u);
  EXPECT_EQ(d.aliased_keys, 1u);  // A.
  // A: 6 x 1000, B: 3 x 2000, C: 2 x 3000.
  EXPECT_EQ(d.requested_bytes, 18000u);
  EXPECT_EQ(d.unique_bytes, 6000u);  // 1000 + 2000 + 3000.
  EXPECT_EQ(d.cancels, 2u);
  EXPECT_EQ(d.set_priorities, 2u);
  EXPECT_EQ(d.end_owners, 1u);
  EXPECT_EQ(d.faults, 0u);
  EXPECT_EQ(d.owners, 3u);
  EXPECT_DOUBLE_EQ(d.duration_s, 9.6);  // 9.6 - 0.
}

TEST(Describe, PopularityAndAnExactZipfFit) {
  const format::Description d = format::describe(parse(hand_trace()));
  // Counts 6, 3, 2 = 6 / rank: ln(count) = ln 6 - 1 x ln(rank) exactly.
  ASSERT_EQ(d.ranking.size(), 3u);
  EXPECT_EQ(d.ranking[0].key, "a@r1/pc#0");
  EXPECT_EQ(d.ranking[0].requests, 6u);
  EXPECT_EQ(d.ranking[0].rank, 1u);
  EXPECT_DOUBLE_EQ(d.ranking[0].share, 6.0 / 11);
  EXPECT_EQ(d.ranking[0].size_bytes, 1000u);
  EXPECT_EQ(d.ranking[1].key, "b@r1/pc#0");
  EXPECT_EQ(d.ranking[1].requests, 3u);
  EXPECT_DOUBLE_EQ(d.ranking[1].cumulative_share, 9.0 / 11);
  EXPECT_EQ(d.ranking[2].key, "c@r1/pc#0");
  EXPECT_EQ(d.ranking[2].requests, 2u);
  EXPECT_DOUBLE_EQ(d.ranking[2].cumulative_share, 1.0);
  EXPECT_NEAR(d.zipf_alpha, 1.0, 1e-12);
  EXPECT_NEAR(d.zipf_r2, 1.0, 1e-12);
  EXPECT_EQ(d.zipf_ranks, 3u);
  // ceil(3 / 100) = ceil(3 / 10) = 1 key: A's 6 of 11.
  EXPECT_DOUBLE_EQ(d.top_1pct_share, 6.0 / 11);
  EXPECT_DOUBLE_EQ(d.top_10pct_share, 6.0 / 11);
  EXPECT_EQ(d.one_hit_wonders, 0u);
  EXPECT_DOUBLE_EQ(d.one_hit_wonder_share, 0.0);
}

TEST(Describe, ZipfOfTwoKeysAndOfOne) {
  // p asked 4 times, q once: alpha = (ln 4 - ln 1) / (ln 2 - ln 1) = 2; two
  // points fit exactly. q is a one-hit wonder (1 of 2 keys).
  std::string two = R"({"format": "demandflight-trace", "version": 1, "name": "two"})"
                    "\n" +
                    artifact("p", "p", 10) + artifact("q", "q", 30);
  for (int i = 0; i < 4; ++i)
    two += subscribe(i, "p" + std::to_string(i), "o", "p", 1);
  two += subscribe(4, "q0", "o", "q", 1);
  const format::Description d = format::describe(parse(two));
  EXPECT_NEAR(d.zipf_alpha, 2.0, 1e-12);
  EXPECT_NEAR(d.zipf_r2, 1.0, 1e-12);
  EXPECT_EQ(d.one_hit_wonders, 1u);
  EXPECT_DOUBLE_EQ(d.one_hit_wonder_share, 0.5);
  EXPECT_DOUBLE_EQ(d.top_1pct_share, 0.8);  // ceil(2 / 100) = 1 key: 4 of 5.

  // Equal counts: a flat line, alpha 0, and a perfect fit.
  const std::string flat = R"({"format": "demandflight-trace", "version": 1, "name": "flat"})"
                           "\n" +
                           artifact("p", "p", 10) + artifact("q", "q", 30) +
                           subscribe(0, "d1", "o", "p", 1) + subscribe(1, "d2", "o", "q", 1);
  const format::Description f = format::describe(parse(flat));
  EXPECT_DOUBLE_EQ(f.zipf_alpha, 0.0);
  EXPECT_DOUBLE_EQ(f.zipf_r2, 1.0);
  // Keys with equal counts rank by their text.
  EXPECT_EQ(f.ranking[0].key, "p@r1/pc#0");

  // One key: nothing to fit.
  const std::string one = R"({"format": "demandflight-trace", "version": 1, "name": "one"})"
                          "\n" +
                          artifact("p", "p", 10) + subscribe(0, "d1", "o", "p", 1);
  const format::Description o = format::describe(parse(one));
  EXPECT_TRUE(std::isnan(o.zipf_alpha));
  EXPECT_TRUE(std::isnan(o.reuse_time_s.p50));
  EXPECT_EQ(o.reuse_time_s.count, 0u);
}

TEST(Describe, ReuseTimesAndDistances) {
  const format::Description d = format::describe(parse(hand_trace()));
  // Cold: [0] A, [2] B, [3] C. Re-requests (time since the key's previous
  // request; distinct other keys in between):
  //   [1] A  1 - 0     = 1     nothing             0
  //   [4] B  4 - 1     = 3     [3] C               1
  //   [5] A  6 - 1     = 5     [2] B [3] C [4] B   2
  //   [6] A  6.5 - 6   = 0.5   nothing             0
  //   [7] B  7 - 4     = 3     [5] A [6] A         1
  //   [8] C  8 - 3     = 5     [4] B .. [7] B      2 (A, B)
  //   [9] A  9 - 6.5   = 2.5   [7] B [8] C         2
  //   [10] A 9.2 - 9   = 0.2   nothing             0
  EXPECT_EQ(d.cold_requests, 3u);
  // Times sorted: 0.2 0.5 1 2.5 3 3 5 5 (n = 8). Nearest rank: p10 the
  // ceil(0.8) = 1st, p50 the 4th, p90 the ceil(7.2) = 8th, p99 the 8th.
  EXPECT_EQ(d.reuse_time_s.count, 8u);
  EXPECT_NEAR(d.reuse_time_s.p10, 0.2, 1e-9);
  EXPECT_DOUBLE_EQ(d.reuse_time_s.p50, 2.5);
  EXPECT_DOUBLE_EQ(d.reuse_time_s.p90, 5);
  EXPECT_DOUBLE_EQ(d.reuse_time_s.p99, 5);
  EXPECT_NEAR(d.reuse_time_s.min, 0.2, 1e-9);
  EXPECT_DOUBLE_EQ(d.reuse_time_s.max, 5);
  EXPECT_NEAR(d.reuse_time_s.mean, 20.2 / 8, 1e-9);
  // Distances sorted: 0 0 0 1 1 2 2 2.
  EXPECT_EQ(d.reuse_distance.count, 8u);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p10, 0);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p50, 1);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p90, 2);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p99, 2);
  EXPECT_DOUBLE_EQ(d.reuse_distance.mean, 1);  // 8 / 8.
}

TEST(Describe, ReuseDistanceCountsDistinctKeysOnALongerSequence) {
  // Keys in order: x y z y y x z w x. Distances of the re-requests:
  //   y (ord 3): between 1 and 3: z             -> 1
  //   y (ord 4): adjacent                       -> 0
  //   x (ord 5): between 0 and 5: y z y y       -> 2
  //   z (ord 6): between 2 and 6: y y x         -> 2
  //   x (ord 8): between 5 and 8: z w           -> 2
  const std::string keys = "xyzyyxzwx";
  std::string text = R"({"format": "demandflight-trace", "version": 1, "name": "seq"})"
                     "\n";
  for (const char k : std::string("xyzw"))
    text += artifact(std::string(1, k), std::string(1, k), 10);
  for (std::size_t i = 0; i < keys.size(); ++i)
    text +=
        subscribe(static_cast<double>(i), "d" + std::to_string(i), "o", std::string(1, keys[i]), 1);
  const format::Description d = format::describe(parse(text));
  EXPECT_EQ(d.cold_requests, 4u);
  // Sorted: 0 1 2 2 2; mean 7 / 5; p10 the 1st, p50 the 3rd, p90 the 5th.
  EXPECT_EQ(d.reuse_distance.count, 5u);
  EXPECT_DOUBLE_EQ(d.reuse_distance.min, 0);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p10, 0);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p50, 2);
  EXPECT_DOUBLE_EQ(d.reuse_distance.p90, 2);
  EXPECT_DOUBLE_EQ(d.reuse_distance.mean, 7.0 / 5);
}

TEST(Describe, Sizes) {
  const format::Description d = format::describe(parse(hand_trace()));
  // Per key: 1000 2000 3000: p10 the 1st, p50 the 2nd, p90 and p99 the 3rd.
  EXPECT_EQ(d.key_size_bytes.count, 3u);
  EXPECT_DOUBLE_EQ(d.key_size_bytes.p10, 1000);
  EXPECT_DOUBLE_EQ(d.key_size_bytes.p50, 2000);
  EXPECT_DOUBLE_EQ(d.key_size_bytes.p90, 3000);
  EXPECT_DOUBLE_EQ(d.key_size_bytes.mean, 2000);
  // Per request: 6 x 1000, 3 x 2000, 2 x 3000 (n = 11): p10 the 2nd (1000),
  // p50 the 6th (1000), p90 the 10th (3000), p99 the 11th (3000).
  EXPECT_EQ(d.request_size_bytes.count, 11u);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.p10, 1000);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.p50, 1000);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.p90, 3000);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.p99, 3000);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.min, 1000);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.max, 3000);
  EXPECT_DOUBLE_EQ(d.request_size_bytes.mean, 18000.0 / 11);
}

TEST(Describe, SingleFlightAndOrphanOpportunities) {
  const format::Description d = format::describe(parse(hand_trace()));
  // d2 (inside d1's [0, 2)), d7 (inside d6's [6, 8)), d11 (inside d10's [9, 9.5)).
  EXPECT_EQ(d.overlapping_requests, 3u);
  EXPECT_DOUBLE_EQ(d.overlapping_share, 3.0 / 11);
  EXPECT_EQ(d.single_flight_saved_bytes, 3000u);
  // d3 cancelled at 2 < 4; d4's owner ended at 5 < 7; d10's cancel at 9.6
  // comes after its timeout (9.5): not in flight.
  EXPECT_EQ(d.cancelled_demands, 2u);    // d3 and d10.
  EXPECT_EQ(d.owner_ended_demands, 1u);  // d4.
  EXPECT_EQ(d.cancelled_in_flight, 1u);
  EXPECT_EQ(d.owner_ended_in_flight, 1u);
  EXPECT_DOUBLE_EQ(d.orphan_share, 2.0 / 11);
  // B comes back with d5 at 4 (2 s after the cancel), C with d9 at 8 (3 s
  // after the end): p50 of {2, 3} is the 1st.
  EXPECT_EQ(d.came_back, 2u);
  EXPECT_EQ(d.came_back_s.count, 2u);
  EXPECT_DOUBLE_EQ(d.came_back_s.p50, 2);
  EXPECT_DOUBLE_EQ(d.came_back_s.max, 3);
}

TEST(Describe, OwnerGenerationsDecideWhatAnEndOwnerEnds) {
  // o's generation 1 ends at 1: d1 (gen 1, [0, 11)) in flight, d2 (gen 2)
  // not; d3 (gen 1 again, at 2) is stale: refused at once, an empty window
  // [2, 2), so d4 (of a, at 3) overlaps no window of a (d1's ended at 1).
  const std::string text = R"({"format": "demandflight-trace", "version": 1, "name": "gen", )"
                           R"("platform": {"client_bandwidth_Bps": 1000, "client_latency_s": 0.5,)"
                           R"( "origins": {"cdn": {"bandwidth_Bps": 2000, "latency_s": 0.5}}}})"
                           "\n" +
                           artifact("a", "a", 10000) + artifact("b", "b", 10000) +
                           subscribe(0, "d1", "o", "a", 1, R"(, "owner_generation": 1)") +
                           subscribe(0.5, "d2", "o", "b", 1, R"(, "owner_generation": 2)") +
                           R"({"op": "end_owner", "t": 1, "owner": "o", "owner_generation": 1})" +
                           "\n" + subscribe(2, "d3", "o", "a", 1, R"(, "owner_generation": 1)") +
                           subscribe(3, "d4", "p", "a", 1);
  const format::Description d = format::describe(parse(text));
  EXPECT_EQ(d.owner_ended_demands, 1u);  // d1; the stale d3 is refused, not ended.
  EXPECT_EQ(d.owner_ended_in_flight, 1u);
  EXPECT_EQ(d.cancelled_in_flight, 0u);
  EXPECT_EQ(d.overlapping_requests, 0u);  // d3's window is empty, d1's ended at 1.
  EXPECT_EQ(d.came_back, 1u);             // a again at 2 (d3): 1 s after the end.
  EXPECT_DOUBLE_EQ(d.came_back_s.p50, 1);
}

TEST(Describe, Priorities) {
  const format::Description d = format::describe(parse(hand_trace()));
  // Subscribe priorities: d5 0; d3 2; the other nine 1.
  ASSERT_EQ(d.priorities.size(), 3u);
  EXPECT_EQ(d.priorities[0].priority, 0);
  EXPECT_EQ(d.priorities[0].demands, 1u);
  EXPECT_EQ(d.priorities[1].priority, 1);
  EXPECT_EQ(d.priorities[1].demands, 9u);
  EXPECT_DOUBLE_EQ(d.priorities[1].share, 9.0 / 11);
  EXPECT_EQ(d.priorities[2].priority, 2);
  EXPECT_EQ(d.priorities[2].demands, 1u);
  EXPECT_EQ(d.priority_raises, 1u);  // d4 1 -> 3.
  EXPECT_EQ(d.priority_lowers, 1u);  // d8 1 -> 0.
  EXPECT_EQ(d.priority_unchanged, 0u);
  EXPECT_EQ(d.demands_reprioritized, 2u);
}

TEST(Describe, JsonIsDeterministicAndHasTheFigures) {
  const format::Description d = format::describe(parse(hand_trace()));
  std::ostringstream a, b;
  format::write_description_json(d, a, 2);
  format::write_description_json(format::describe(parse(hand_trace())), b, 2);
  EXPECT_EQ(a.str(), b.str());
  const nlohmann::json j = nlohmann::json::parse(a.str());
  EXPECT_EQ(j["format"], "demandflight-describe");
  EXPECT_EQ(j["counts"]["requests"], 11);
  EXPECT_EQ(j["popularity"]["top"].size(), 2u);  // --top 2.
  EXPECT_EQ(j["popularity"]["top"][1]["key"], "b@r1/pc#0");
  EXPECT_EQ(j["single_flight"]["saved_bytes"], 3000);
  EXPECT_EQ(j["orphans"]["came_back"], 2);
  EXPECT_EQ(j["reuse"]["distance"]["p50"], 1.0);
  EXPECT_EQ(j["priorities"]["raises"], 1);
  // An empty sample's quantiles are null.
  std::ostringstream empty;
  format::write_description_json(
      format::describe(parse(R"({"format": "demandflight-trace", "version": 1, "name": "e"})"
                             "\n")),
      empty);
  const nlohmann::json e = nlohmann::json::parse(empty.str());
  EXPECT_TRUE(e["reuse"]["time_s"]["p50"].is_null());
  EXPECT_EQ(e["counts"]["requests"], 0);
}

}  // namespace
}  // namespace dfl::testing
