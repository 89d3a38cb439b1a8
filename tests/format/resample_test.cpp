// A bootstrap of a trace's owners: each drawn owner brings its own records,
// whole and at their times, under a new name when drawn again.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "demandflight/format/resample.h"

namespace dfl::testing {
namespace {

format::Trace sessions(int owners) {
  std::string text =
      R"({"format": "demandflight-trace", "version": 1, "name": "sessions", "seed": 5})"
      "\n"
      R"({"op": "artifact", "id": "a", "resource": "a", "revision": "r1", "target": "pc", )"
      R"("generation": 0, "size": 1000, "origin": "cdn"})"
      "\n"
      R"({"op": "fault", "t": 0, "kind": "corrupt", "artifact": "a"})"
      "\n";
  for (int o = 0; o < owners; ++o) {
    const std::string owner = "s" + std::to_string(o);
    for (int k = 0; k < o % 3 + 1; ++k) {
      const std::string demand = owner + "-d" + std::to_string(k);
      const double t = o + 0.1 * k;
      text += R"({"op": "subscribe", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand +
              R"(", "owner": ")" + owner + R"(", "artifact": "a", "priority": )" +
              std::to_string(k) + "}\n";
    }
  }
  // Cancels and ends later, in time order, so the file stays sorted.
  for (int o = 0; o < owners; ++o) {
    const std::string owner = "s" + std::to_string(o);
    text += R"({"op": "cancel", "t": )" + std::to_string(100 + o) + R"(, "demand": ")" + owner +
            R"(-d0"})" + "\n";
  }
  for (int o = 0; o < owners; ++o) {
    text += R"({"op": "end_owner", "t": )" + std::to_string(200 + o) + R"(, "owner": "s)" +
            std::to_string(o) + "\"}\n";
  }
  std::istringstream in(text);
  return format::read_trace(in, "sessions");
}

// What an owner did, by its original name: (op, t, demand's original id, priority).
using Story = std::vector<std::tuple<int, double, std::string, int>>;
std::map<std::string, std::vector<Story>> stories(const format::Trace& t) {
  std::map<std::string, Story> by_owner;
  std::vector<std::string> owner_of(t.demand_ids.size());
  auto base = [](const std::string& name) { return name.substr(0, name.find('#')); };
  for (const format::Record& r : t.records) {
    std::string owner;
    if (r.op == format::Op::subscribe) owner_of[r.demand] = t.owners[r.owner];
    if (r.op == format::Op::subscribe || r.op == format::Op::end_owner) owner = t.owners[r.owner];
    if (r.op == format::Op::cancel || r.op == format::Op::set_priority) owner = owner_of[r.demand];
    if (owner.empty()) continue;
    const std::string demand = r.op == format::Op::end_owner ? "" : base(t.demand_ids[r.demand]);
    by_owner[owner].emplace_back(static_cast<int>(r.op), r.t, demand,
                                 r.op == format::Op::subscribe ? r.priority : 0);
  }
  std::map<std::string, std::vector<Story>> out;
  for (auto& [owner, story] : by_owner)
    out[base(owner)].push_back(story);
  return out;
}

TEST(Resample, ABootstrapOfOwnersCopiesWholeOwnersUnderNewNames) {
  const format::Trace trace = sessions(30);
  const format::Trace r = format::resample(trace, format::Resample::owners, 1);
  EXPECT_EQ(r.owners.size(), trace.owners.size());
  EXPECT_EQ(std::set<std::string>(r.owners.begin(), r.owners.end()).size(), r.owners.size())
      << "copies are named apart";
  const auto original = stories(trace);
  const auto drawn = stories(r);
  std::size_t copies = 0, repeated = 0;
  for (const auto& [owner, versions] : drawn) {
    ASSERT_TRUE(original.contains(owner)) << owner;
    for (const Story& story : versions)
      EXPECT_EQ(story, original.at(owner)[0]) << owner << ": not its records, whole";
    copies += versions.size();
    repeated += versions.size() > 1;
  }
  EXPECT_EQ(copies, trace.owners.size());
  EXPECT_GT(repeated, 0u) << "30 draws with replacement repeat some owner";
  EXPECT_LT(drawn.size(), original.size()) << "and leave some out";
  // Sorted by time, demands numbered in subscribe order, the fault kept.
  std::uint32_t next_demand = 0;
  std::size_t faults = 0;
  for (std::size_t i = 0; i < r.records.size(); ++i) {
    if (i > 0) {
      EXPECT_LE(r.records[i - 1].t, r.records[i].t);
    }
    if (r.records[i].op == format::Op::subscribe) {
      EXPECT_EQ(r.records[i].demand, next_demand++);
    }
    faults += r.records[i].op == format::Op::fault;
  }
  EXPECT_EQ(next_demand, r.demand_ids.size());
  EXPECT_EQ(faults, 1u);
  // At equal times the file's order holds: the fault at t = 0 before s0's subscribe.
  EXPECT_EQ(r.records[0].op, format::Op::fault);
  // Seeded: the same seed the same draw, another seed another.
  const format::Trace again = format::resample(trace, format::Resample::owners, 1);
  EXPECT_EQ(again.owners, r.owners);
  EXPECT_EQ(again.demand_ids, r.demand_ids);
  EXPECT_NE(format::resample(trace, format::Resample::owners, 2).owners, r.owners);
  EXPECT_EQ(format::resample(trace, format::Resample::none, 1).demand_ids, trace.demand_ids);
  EXPECT_THROW(format::parse_resample("sessions"), std::invalid_argument);
}

}  // namespace
}  // namespace dfl::testing
